"""Portable model bundles: :func:`write_bundle` (``gspdml bundle RUN_DIR --out DIR``) and
:func:`from_pretrained`.

A bundle is a folder laid out as a Hugging Face model repository (it can be uploaded as is):

* ``model.safetensors``: the run's weights (byte copy; its metadata rebuilds the embedder);
* ``config.yaml``: the run's resolved config;
* ``preprocessing.json``: the evaluation transform
  (:class:`~gspdml.data.eval_transform.EvalTransform` fields) and, under ``decoding``, how a file
  is decoded before it (:data:`gspdml.data.images.DECODING`);
* ``README.md``: the model card (method, backbone, protocol and split, metrics with the set they
  were measured on, data hash, library version), with hub metadata in its YAML header;
* ``bundle.json``: format, version, library version, sha256 of the weights and (``files``) of
  ``config.yaml`` and ``preprocessing.json``, checked by :func:`from_pretrained`; data hash.

``from_pretrained`` reads a folder, or a hub repository ``owner/name`` through
``huggingface_hub.snapshot_download``, into a :class:`BundledEncoder` that decodes images with
the library's loader, as the run did. A bundle is written from the run directory alone; the data
hash of the model card needs the run's dataset, else it is marked unavailable.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
import yaml

from gspdml.config import RunConfig, parse_yaml
from gspdml.config.migration import read_run_config
from gspdml.data.eval_transform import EvalTransform, parse_eval_transform
from gspdml.data.images import DECODING
from gspdml.errors import ConfigError, DataError, read_json_object
from gspdml.evaluation.baseline_rows import baseline_rows
from gspdml.file_digest import file_sha256
from gspdml.models import Embedder
from gspdml.output_files import (
    check_writable_folder,
    json_text,
    new_held_temporary,
    output_error,
    remove_killed_temporaries,
    replace_folder,
)
from gspdml.registry import parse_spec
from gspdml.retrieval.preprocessing import eval_transform_from_config, load_model_input
from gspdml.training.run_dir import (
    CONFIG_FILE,
    WEIGHT_FILES,
    WEIGHTS_FILE,
    build_run_data,
    check_results_match,
    check_same_model,
    load_embedder,
    read_results,
    read_weights,
    weights_digest,
)
from gspdml.version import __version__

FORMAT = "gspdml-bundle"
#: the file that marks a folder as a bundle
BUNDLE_FILE = "bundle.json"
PREPROCESSING_FILE = "preprocessing.json"
FILES = (WEIGHTS_FILE, CONFIG_FILE, PREPROCESSING_FILE, "README.md", BUNDLE_FILE)
#: the files whose sha256 ``bundle.json`` records besides the weights' (the model card may be
#: edited, as on a hub)
CHECKED_FILES = (CONFIG_FILE, PREPROCESSING_FILE)
#: the fix of a damaged bundle
REWRITE = "write the bundle again from its run (gspdml bundle RUN_DIR --out DIR --overwrite)"


def data_hash(config: RunConfig) -> str:
    """``sha256:<hex>`` over the labels (and file names, as bytes, where the dataset has them) of
    every split of the run's dataset, in order: it changes when the data or the split changes.
    The reader's warnings, shown when the run trained, are not repeated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = build_run_data(config)
    digest = hashlib.sha256()
    parts = [("train", data.train)]
    for name in ("val", "test"):
        split = getattr(data, name)
        if split is not None:
            parts += [(f"{name}.query", split.query), (f"{name}.gallery", split.gallery)]
    for name, dataset in parts:
        if dataset is None:
            continue
        digest.update(name.encode())
        digest.update(torch.as_tensor(dataset.labels).to(torch.int64).numpy().tobytes())
        for path in getattr(dataset, "paths", None) or ():
            digest.update(os.fsencode(Path(path).name) + b"\0")  # as bytes: any file name
    return "sha256:" + digest.hexdigest()


def _name(spec: Any, field: str) -> Any:
    """The name of a registry spec (a name or a mapping with ``name``); a list of them as is."""
    return parse_spec(spec, field)[0] if isinstance(spec, (str, Mapping)) else spec


def _baseline_section(results: dict[str, Any]) -> str:
    """The model card's table of the test metrics beside the run's baselines, if it has any."""
    columns, rows = baseline_rows(results)
    if not rows:
        return ""
    cells = [[str(row[0]), *("-" if v is None else f"{v:.4f}" for v in row[1:])] for row in rows]
    lines = ["| " + " | ".join(line) + " |" for line in (columns, *cells)]
    lines.insert(1, "|" + "---|" * len(columns))
    return (
        "\n## Baselines (same test split and protocol)\n\n"
        "`step0`: the model as built, before training; `backbone_gap`: the pretrained backbone's "
        "own features, average-pooled and L2-normalised.\n\n" + "\n".join(lines) + "\n"
    )


def _model_card(
    config: RunConfig, results: dict[str, Any], digest: str, weights: str, data_digest: str
) -> str:
    dataset = _name(config.data.dataset, "data.dataset")
    pooling = _name(config.model.pooling, "model.pooling")
    evaluation = config.evaluation
    metrics = results.get("test") or {}
    rows = "\n".join(
        f"| {key} | {value:.4f} |"
        for key, value in metrics.items()
        if isinstance(value, float) and not key.startswith("num")
    )
    header = yaml.safe_dump(
        {
            "library_name": "gspdml",
            "tags": ["deep-metric-learning", "image-retrieval", str(pooling)],
            "datasets": [str(dataset)],
        },
        sort_keys=False,
    )
    return f"""---
{header}---
# {config.name}

Image embedder trained with gspdml {__version__} for deep metric learning.

- **Method**: pooling `{pooling}`, loss `{_name(config.loss, "loss")}`, embedding dimension {config.model.embedding_dim}
- **Backbone**: `{_name(config.model.backbone, "model.backbone")}`
- **Protocol and split**: dataset `{dataset}`, zero-shot split (training classes disjoint from the
  evaluation classes); model selected on `{evaluation.split}` by
  `{evaluation.metric}`; weights `{weights}`
- **Data hash**: `{data_digest}` (labels and file names of every split)
- **Weights**: `{digest}`
- **Library version**: gspdml {__version__}

## Metrics (test split of `{dataset}`, from the run's results.json)

| metric | value |
|---|---|
{rows or "| (no test metrics recorded) | |"}
{_baseline_section(results)}
## Use

```python
import gspdml
encoder = gspdml.from_pretrained("path/to/this/folder")
embeddings = encoder(["image1.jpg", "image2.jpg"])
```
"""


def write_bundle(
    run_dir: str | Path, out: str | Path, weights: str = "final", overwrite: bool = False
) -> Path:
    """Write the bundle of a run to ``out``, built in a temporary folder that then replaces the
    previous one (:func:`gspdml.output_files.replace_folder`): a full disk leaves it as it was."""
    run_dir, out = Path(run_dir), Path(out)
    if out.exists() and not overwrite:
        raise ConfigError("--out", f"{out} already exists; pass --overwrite to replace it")
    if os.path.lexists(out) and not _replaceable(out):
        raise ConfigError(
            "--out",
            f"{out} is not a gspdml bundle (no {BUNDLE_FILE}); --overwrite replaces a bundle "
            "folder only: choose another --out",
        )
    check_writable_folder(out.parent)  # before the work: read-only, under a file, a full disk
    if weights not in WEIGHT_FILES:
        raise ConfigError(
            "--weights", f"unknown weights {weights!r}; allowed: {', '.join(WEIGHT_FILES)}"
        )
    weights_path = run_dir / WEIGHT_FILES[weights]
    for path in (run_dir / CONFIG_FILE, weights_path):
        if not path.is_file():
            raise DataError(f"{path}: not found (is {run_dir} a finished gspdml run?)")
    if weights == "final":  # the model card states results.json's metrics of these weights
        check_results_match(run_dir)
    config = read_run_config(run_dir / CONFIG_FILE)
    _, meta = read_weights(weights_path)
    check_same_model(weights_path, meta, config, run_dir / CONFIG_FILE)
    transform = eval_transform_from_config(config, int(meta["in_channels"]))
    if not isinstance(transform, EvalTransform):
        raise ConfigError(
            "data.eval_transform",
            f"{run_dir}: the run's evaluation transform is its dataset's own code, "
            "which a bundle cannot carry; add data.eval_transform (the options of "
            "gspdml.data.eval_transform) to its config.yaml",
        )
    results = read_results(run_dir) or {}
    try:
        data_digest = data_hash(config)
    except (ConfigError, DataError) as err:
        data_digest = f"unavailable ({err})"
    remove_killed_staging(out)
    try:  # a name of its own: never another process's staging folder, nor a folder of the user's
        held, staging = new_held_temporary(out, folder=True)
    except OSError as exc:
        raise output_error(out, exc) from exc
    try:
        _fill(staging, run_dir, weights_path, weights, config, transform, results, data_digest)
        replace_folder(staging, out)
    except OSError as exc:  # a full disk: the previous bundle, if any, stays as it was
        shutil.rmtree(staging, ignore_errors=True)
        raise output_error(out, exc) from exc
    finally:
        os.close(held)
    return out


def remove_killed_staging(out: Path) -> list[Path]:
    """Remove (and return) the staging folders of killed writes of the bundle ``out``: named as
    :func:`write_bundle` names them (``.OUT.<random>.tmp``), holding bundle files only, and
    held by no running write (:func:`gspdml.output_files.remove_killed_temporaries`)."""
    return remove_killed_temporaries(out, FILES)


def _replaceable(out: Path) -> bool:
    """Whether ``--overwrite`` may replace ``out``: a bundle folder (not a link) or an empty one."""
    if out.is_symlink() or not out.is_dir():
        return False
    return (out / BUNDLE_FILE).is_file() or not any(out.iterdir())


def _fill(
    staging: Path,
    run_dir: Path,
    weights_path: Path,
    weights: str,
    config: RunConfig,
    transform: EvalTransform,
    results: dict[str, Any],
    data_digest: str,
) -> None:
    """Write the bundle's files into the folder ``staging``."""
    shutil.copyfile(weights_path, staging / WEIGHTS_FILE)
    digest = weights_digest(staging)
    shutil.copyfile(run_dir / CONFIG_FILE, staging / CONFIG_FILE)
    preprocessing = {**transform.describe(), "decoding": DECODING}
    files = {
        PREPROCESSING_FILE: json_text(preprocessing, indent=1),
        "README.md": _model_card(config, results, digest, weights, data_digest),
    }
    for name, text in files.items():
        (staging / name).write_text(text, encoding="utf-8")
    record = {
        "format": FORMAT,
        "version": 1,
        "library_version": __version__,
        "weights": digest,
        "files": {name: file_sha256(staging / name) for name in CHECKED_FILES},
        "data_hash": data_digest,
        "metrics": results.get("test"),
        "evaluation_set": "test",
    }
    (staging / BUNDLE_FILE).write_text(json_text(record, indent=1), encoding="utf-8")


@dataclass
class BundledEncoder:
    """A ready embedder: ``encoder(images)`` -> L2-normalised embeddings ``[N, D]`` (float32, CPU)
    of image files or PIL images, decoded and preprocessed as the run evaluated them
    (:func:`gspdml.retrieval.preprocessing.load_model_input`)."""

    model: Embedder
    transform: EvalTransform
    config: dict[str, Any]
    info: dict[str, Any]

    @torch.no_grad()
    def __call__(self, images: Sequence[Any], batch_size: int = 64) -> torch.Tensor:
        if not len(images):
            raise ConfigError("images", "nothing to embed")
        device = next(self.model.parameters()).device
        out = []
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            batch = [load_model_input(image, self.transform) for image in chunk]
            out.append(self.model(torch.stack(batch).to(device)).embedding.float().cpu())
        return torch.cat(out)


def from_pretrained(
    name_or_path: str | Path,
    device: str = "cpu",
    *,
    cache_dir: Optional[str] = None,
    local_files_only: bool = False,
    revision: Optional[str] = None,
) -> BundledEncoder:
    """The encoder of a bundle folder, or of a hub repository ``owner/name`` (needs huggingface_hub).
    A name that is no folder here is looked up on the hub only when it reads as a repository id;
    a file, a :class:`~pathlib.Path`, or a path starting with ``.``, ``~`` or ``/`` or holding more
    separators than ``owner/name`` is refused naming it (:func:`_check_local_path`)."""
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        _check_local_path(name_or_path, folder)
        folder = _hub_snapshot(str(name_or_path), cache_dir, local_files_only, revision)
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise DataError(f"{folder}: not a gspdml bundle (missing {', '.join(missing)})")
    info = read_json_object(folder / BUNDLE_FILE)
    if info.get("format") != FORMAT:
        raise DataError(
            f"{folder / 'bundle.json'}: not a gspdml bundle (format {info.get('format')!r})"
        )
    digest = weights_digest(folder)
    if digest != info.get("weights"):
        raise DataError(
            f"{folder / WEIGHTS_FILE}: sha256 {digest} differs from the bundle's {info.get('weights')}"
        )
    _check_recorded_files(folder, info)
    model, meta = load_embedder(folder / WEIGHTS_FILE, device)
    recorded = read_json_object(folder / PREPROCESSING_FILE)
    recorded.pop(
        "decoding", None
    )  # the rules of gspdml.data.images, which load_model_input follows
    try:  # a received file: its sizes too (at most MAX_SIDE), before any image is transformed
        transform = parse_eval_transform(
            recorded, str(folder / PREPROCESSING_FILE), int(meta["in_channels"])
        )
    except ConfigError as err:
        raise DataError(f"{err}; {REWRITE}") from None
    config = _bundled_config(folder / CONFIG_FILE)
    return BundledEncoder(model, transform, config, info)


def _check_recorded_files(folder: Path, info: dict[str, Any]) -> None:
    """Refuse a bundle whose config or preprocessing differs from the sha256 that ``bundle.json``
    records (``files``; a bundle written before it recorded them is read as it is)."""
    recorded = info.get("files", {})
    if not isinstance(recorded, dict) or not all(
        isinstance(recorded.get(name, ""), str) for name in CHECKED_FILES
    ):
        raise DataError(
            f"{folder / BUNDLE_FILE}: field 'files' is {json_text(recorded)[:80]}, not the "
            f"sha256 of each of {', '.join(CHECKED_FILES)}; {REWRITE}"
        )
    for name in CHECKED_FILES:
        if name in recorded and file_sha256(folder / name) != recorded[name]:
            raise DataError(
                f"{folder / name}: sha256 {file_sha256(folder / name)[:19]}... differs from the "
                f"{recorded[name][:19]}... {BUNDLE_FILE} records: the file changed after the "
                f"bundle was written (the embeddings would not be the run's); {REWRITE}"
            )


def _bundled_config(path: Path) -> dict[str, Any]:
    """The run config a bundle carries (as stored), or a :class:`DataError` naming the file."""
    try:
        config = parse_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise DataError(
            f"{path}: not the bundle's run config ({type(err).__name__}: "
            f"{' '.join(str(err).split())}); {REWRITE}"
        ) from None
    if not isinstance(config, dict):
        raise DataError(
            f"{path}: expected a mapping at the top level, got {type(config).__name__}; {REWRITE}"
        )
    return config


#: what a hub repository id looks like (``name`` or ``owner/name``, word characters, ``-`` and
#: ``.``, each part starting with a word character); other names not found here are local paths
_HUB_REPOSITORY = re.compile(r"\w[\w.-]*(/\w[\w.-]*)?")


def _check_local_path(name_or_path: str | Path, path: Path) -> None:
    """Refuse ``name_or_path``, which is no folder, when it is a local path rather than a hub
    repository id: it exists (a file), is a :class:`~pathlib.Path`, or does not read as an id
    (``./bundle``, ``~/bundle``, ``/data/bundle``, ``runs/x/bundle``, a backslash)."""
    fix = "pass the folder gspdml bundle RUN_DIR --out DIR wrote, or a hub repository as owner/name"
    if os.path.lexists(path):
        if (path.parent / BUNDLE_FILE).is_file():
            fix = f"pass its folder {path.parent}, a bundle"
        raise DataError(f"{path}: not a bundle folder (it is a file); {fix}")
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or not _HUB_REPOSITORY.fullmatch(text):
        raise DataError(f"{path}: no such folder (a local path, never looked up on the hub); {fix}")


def _hub_snapshot(
    repo_id: str, cache_dir: Optional[str], local_files_only: bool, revision: Optional[str]
) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise DataError(
            f"{repo_id}: no such folder; loading a hub repository needs huggingface_hub "
            "(pip install gspdml[hub])"
        ) from None
    try:
        return Path(
            snapshot_download(
                repo_id, cache_dir=cache_dir, local_files_only=local_files_only, revision=revision
            )
        )
    except Exception as err:  # the hub client raises many types (offline, not found, auth)
        raise DataError(
            f"{repo_id}: cannot load the hub repository ({type(err).__name__}: {err})"
        ) from None
