# Excerpt of euwern/proxynca_pp utils.py at 217233d (MIT, see LICENSE): load_config (its lines 32 to 41),
# verbatim, with the imports its eval of config strings needs (json, torch, loss, networks);
# the evaluation functions and their imports are left out.
import json
import torch
import loss
import networks


def load_config(config_name = 'config.json'):
    config = json.load(open(config_name))
    def eval_json(config):
        for k in config:
            if type(config[k]) != dict:
                config[k] = eval(config[k])
            else:
                eval_json(config[k])
    eval_json(config)
    return config
