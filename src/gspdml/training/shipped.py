"""Making the recipe weights the package ships (``scripts/ship_pretrained.py``): trained once by
:func:`gspdml.training.pretrain.train_recipe` and kept beside the recipe with their SHA-256 in
the manifest, so ``gspdml demo`` on a fresh machine reads them instead of training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import torch

from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256
from gspdml.output_files import atomic_write, atomic_write_text, json_text
from gspdml.training.pretrain import (
    PRECISIONS_SHIPPABLE,
    SHIPPED_DIR,
    SHIPPED_MANIFEST,
    RecipeSource,
    content_key,
    load_recipe,
    shipped_manifest,
    train_recipe,
)


def ship_recipe_weights(
    source: RecipeSource, folder: Optional[Path] = None, device: Union[str, torch.device] = "cpu"
) -> dict[str, Any]:
    """Train the recipe ``source`` on ``device``, write ``folder/<name>.safetensors`` and its
    manifest entry (returned). The recipe must name a precision that does not depend on the
    machine."""
    from safetensors.torch import save_file

    folder = folder or SHIPPED_DIR
    recipe = load_recipe(source)
    precision = recipe.train.precision
    if precision not in PRECISIONS_SHIPPABLE:
        raise ConfigError(
            "pretrain.train.precision",
            f"{precision!r}: shipped weights need a precision that does not depend on the "
            f"machine ({', '.join(PRECISIONS_SHIPPABLE)})",
        )
    state, record = train_recipe(recipe, verbose=True, device=device)
    path = folder / f"{recipe.name}.safetensors"
    atomic_write(path, lambda tmp: save_file(state, tmp, metadata={"record": json_text(record)}))
    device_type = torch.device(record["device"]).type
    entry = {
        "file": path.name,
        "sha256": file_sha256(path).removeprefix("sha256:"),
        "key": content_key(recipe, precision, device_type),
        "precision": precision,
        "device": device_type,
        "val_accuracy": record["val_accuracy"],
        "made_by": f"python scripts/ship_pretrained.py {recipe.name}",
    }
    manifest = {**shipped_manifest(folder), recipe.name: entry}
    text = json_text(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write_text(folder / SHIPPED_MANIFEST, text)
    return entry
