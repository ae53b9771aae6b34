"""``gspdml pretrain RECIPE [RECIPE ...]``: pre-train (or find cached) backbone weights (:mod:`gspdml.training.pretrain`)."""

from __future__ import annotations

import argparse

from gspdml.output_files import json_text


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from gspdml.training.pretrain import load_recipe, pretrained_state, weights_path

    for name in args.recipes:
        recipe = load_recipe(name)
        if args.data_root is not None:
            recipe["data"]["root"] = args.data_root
        _, record = pretrained_state(recipe)
        print(json_text({**record, "path": str(weights_path(recipe))}, indent=2))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain", help="pre-train backbone weights from a recipe (cached by content hash)"
    )
    p.add_argument(
        "recipes", nargs="+", help="recipe names (gspdml/presets/pretrain) or YAML files"
    )
    p.add_argument(
        "--data-root",
        help="the recipes' data.root: where their data is (e.g. the folder holding cifar-100-python/)",
    )
    p.set_defaults(func=_cmd_pretrain)
