"""``gspdml pretrain RECIPE [RECIPE ...]``: pre-train (or find cached) backbone weights (:mod:`gspdml.training.pretrain`)."""

from __future__ import annotations

import argparse

from gspdml.cli.binding import command
from gspdml.output_files import json_text


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from gspdml.training.pretrain import load_recipe, pretrained_state, pretrained_weights_file

    for name in args.recipes:
        recipe = load_recipe(name)
        if args.data_root is not None:
            recipe = recipe.on_root(args.data_root)
        _, record = pretrained_state(recipe, device=args.device)
        path = pretrained_weights_file(recipe, verbose=False, device=args.device)
        print(json_text({**record, "path": str(path)}, indent=2))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "pre-train backbone weights from a recipe (cached by content hash)"
    add = command(sub, "pretrain", _cmd_pretrain, help=text)
    add("recipes", nargs="+", help="recipe names (gspdml/presets/pretrain) or YAML files")
    text = "the recipes' data.root: where their data is (e.g. the folder holding cifar-100-python/)"
    add("--data-root", help=text)
    text = "where to train on a cache miss: auto (the GPU when there is one), cpu, cuda[:i]"
    add("--device", default="auto", help=text)
