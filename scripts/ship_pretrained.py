"""Re-make the pre-trained weights the package ships (``make experiments`` runs it).

    python scripts/ship_pretrained.py [RECIPE ...] [--device cpu]

Trains each recipe (default: every recipe in the package's manifest,
``src/gspdml/presets/pretrain/shipped.json``) as ``gspdml pretrain`` does, writes the weights
beside the recipe and their SHA-256 into the manifest (:mod:`gspdml.training.shipped`). Commit
both files: the hash is what ``gspdml`` checks before it uses them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gspdml.training.pretrain import shipped_manifest  # noqa: E402
from gspdml.training.shipped import ship_recipe_weights  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*", help="recipe names (default: the shipped ones)")
    parser.add_argument("--device", default="cpu", help="where to train (default: cpu)")
    args = parser.parse_args(argv)
    for name in args.recipes or sorted(shipped_manifest()):
        entry = ship_recipe_weights(name, device=args.device)
        print(json.dumps({name: entry}, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
