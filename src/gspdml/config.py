"""One YAML file describes one run completely.

``load_config(source, overrides)`` reads the file (or the preset of that name shipped inside the
package, :func:`preset_path`), merges its ``base`` includes (a list of YAML
files, relative to the including file, merged in order, then the file itself on top) over
:data:`DEFAULTS`, applies command-line overrides ``key.sub=value`` (values parsed as YAML), and
validates everything before any work: unknown sections or keys, out-of-range values and unknown
component names fail with a :class:`~gspdml.errors.ConfigError` naming the field and the allowed
values. Component specs (``data.dataset``, ``model.backbone``, ``model.pooling``, ``loss``) are
brought to the canonical ``{name: ..., **options}`` form so overrides can address their options
(``model.pooling.mu=0.2``).
"""

from __future__ import annotations

import contextlib
import copy
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

import yaml

from gspdml.compat.hardware import PRECISIONS
from gspdml.errors import ConfigError
from gspdml.registry import parse_spec

DEFAULTS: dict[str, Any] = {
    "name": "run",
    "description": "",
    "output_dir": "runs",
    "seed": 0,
    "data": {
        "dataset": {"name": "collage_digits"},
        "classes_per_batch": 16,
        "samples_per_class": 4,
        "halves": False,
        "replacement": False,
        "sampler": "balanced",   # or random: random batches of classes_per_batch x samples_per_class items
        "num_workers": 0,
        "eval_batch_size": 256,
        "eval_transform": None,  # null: the dataset's own (recorded in config.yaml by the trainer)
    },
    "model": {
        "backbone": {"name": "small_cnn"},
        "embedding_dim": 128,
        "head": None,            # null: the pooling's own placement (GSP local, others global)
        "head_bias": True,
        "pooling": {"name": "gap"},
        "pooled_norm": None,
        "normalize": True,
        "cache_backbone_features": False,  # frozen backbones only: each image's map computed once
    },
    "loss": {"name": "c2"},
    "optimizer": {
        "name": "adam",
        "lr": 1.0e-3,
        "weight_decay": 1.0e-4,
        "betas": [0.9, 0.99],
        "momentum": 0.9,
        "eps": 1.0e-8,
        "lr_multipliers": {"backbone": 1.0, "head": 1.0, "pooling": 1.0},
        "grad_clip_norm": None,
        "grad_clip_value": None,
    },
    "schedule": {"max_steps": 2000, "warmup_steps": 0, "plateau": None, "step_decay": None},
    "evaluation": {
        "every": 100,
        "split": "val",
        "metric": "map_at_r",
        "patience": 15,
        "restore_best": True,
        "recall_at": [1, 2, 4, 8],
        "postprocess": [],
        "select_postprocessed": False,  # true: select by evaluation.metric after evaluation.postprocess
    },
    "trainer": {"precision": "auto", "device": "auto", "log_every": 10, "progress": True, "distributed": "auto",
                "keep_freed_memory": True, "checkpoint_every": None, "tensorboard": "auto"},
}

#: fields whose value is a registry spec (free-form options below them)
SPEC_FIELDS = ("data.dataset", "model.backbone", "model.pooling", "loss")
OPTIMIZERS = ("adam", "adamw", "sgd")
TENSORBOARD = ("auto", True, False)
PLATEAU_KEYS = {"factor": 0.5, "patience": 4, "min_lr": 1.0e-6}

Source = Union[str, Path, Mapping[str, Any]]

#: the presets shipped with the package (``gspdml train demo-gsp`` works from any directory)
PRESETS_DIR = Path(__file__).resolve().parent / "presets"


#: preset folders that hold no run config: include fragments and pre-training recipes
NOT_RUN_CONFIGS = ("base/", "pretrain/")


def preset_names() -> list[str]:
    """Every shipped run config, by the name ``load_config`` takes (``demo-gsp``,
    ``losses/c2-cub``); include fragments and pre-training recipes are left out."""
    names = (str(p.relative_to(PRESETS_DIR).with_suffix("")) for p in PRESETS_DIR.rglob("*.yaml"))
    return sorted(n for n in names if not n.startswith(NOT_RUN_CONFIGS))


def preset_path(source: Union[str, Path]) -> Path:
    """The file a config source names: an existing file as given, else the shipped preset of that
    name (with or without ``.yaml``)."""
    path = Path(source)
    if path.is_file():
        return path
    name = str(source)
    preset = PRESETS_DIR / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if preset.is_file():
        return preset
    raise ConfigError("", f"config file not found: {path.resolve()} (and no preset named {name!r}; "
                          f"presets: {', '.join(preset_names())})")


class _Loader(yaml.SafeLoader):
    """Safe YAML that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def load_config(source: Source, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """Resolve and validate a run config (see the module docstring)."""
    raw = _read_with_bases(source, seen=())
    config = _merge(copy.deepcopy(DEFAULTS), raw)
    for item in overrides:
        _apply_override(config, item)
    _canonicalise_specs(config)
    validate(config)
    _resolve_dataset(config["data"]["dataset"])
    return config


#: dataset options that name files or folders (stored absolute: a run is read back from anywhere)
PATH_OPTIONS = ("root", "path")


def _resolve_dataset(spec: dict[str, Any]) -> None:
    """Fill in the dataset's defaults (so ``gspdml config`` and ``config.yaml`` show every option
    in force) and make relative ``root``/``path`` absolute (relative to the working directory)."""
    import inspect

    from gspdml.data import DATASETS

    factory = DATASETS.get(spec["name"], "data.dataset")
    hidden = {"seed", *getattr(factory, "supplied_by_caller", ())}  # every factory gets the run's seed
    for name, param in inspect.signature(factory).parameters.items():
        if name not in spec and name not in hidden and param.default is not inspect.Parameter.empty:
            spec[name] = copy.deepcopy(param.default)
    for key in PATH_OPTIONS:
        if isinstance(spec.get(key), str):
            spec[key] = str(Path(spec[key]).expanduser().resolve())


def dump_config(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False)


def _read_with_bases(source: Source, seen: tuple[Path, ...]) -> dict[str, Any]:
    if isinstance(source, Mapping):
        data, here = copy.deepcopy(dict(source)), Path.cwd()
    else:
        path = preset_path(source).resolve()
        if path in seen:
            raise ConfigError("base", f"include cycle: {' -> '.join(map(str, (*seen, path)))}")
        try:
            data = parse_yaml(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError("", f"{path}: not valid YAML ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError("", f"{path}: expected a mapping at the top level, got {type(data).__name__}")
        here, seen = path.parent, (*seen, path)
    bases = data.pop("base", None) or []
    if isinstance(bases, (str, Path)):
        bases = [bases]
    _canonicalise_specs(data)
    merged: dict[str, Any] = {}
    for base in bases:
        # relative to the including file; else a shipped preset (a user's config may build on one)
        local = here / base
        merged = _merge(merged, _read_with_bases(local if local.is_file() else base, seen))
    return _merge(merged, data)


def _merge(into: dict[str, Any], update: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Deep merge of mappings; a spec that names another component replaces the old one whole."""
    for key, value in update.items():
        field = f"{where}.{key}" if where else key
        current = into.get(key)
        renamed = field in SPEC_FIELDS and isinstance(current, Mapping) and isinstance(value, Mapping) \
            and current.get("name") != value.get("name", current.get("name"))
        if isinstance(current, dict) and isinstance(value, Mapping) and not renamed:
            into[key] = _merge(current, value, field)
        else:
            into[key] = copy.deepcopy(value)
    return into


def _canonicalise_specs(config: dict[str, Any]) -> None:
    for field in SPEC_FIELDS:
        section, _, key = field.rpartition(".")
        parent = config.get(section) if section else config
        if isinstance(parent, dict) and isinstance(parent.get(key), (str, Mapping)):
            name, kwargs = parse_spec(parent[key], field)
            parent[key] = {"name": name, **kwargs}


def _parent(config: dict[str, Any], dotted: str) -> tuple[dict[str, Any], str]:
    *path, key = dotted.split(".")
    node = config
    for part in path:
        node = node[part]
    return node, key


def _apply_override(config: dict[str, Any], item: str) -> None:
    if "=" not in item:
        raise ConfigError("", f"override {item!r} is not of the form key.sub=value")
    dotted, text = item.split("=", 1)
    try:
        value = parse_yaml(text)
    except yaml.YAMLError:
        value = text
    parts = dotted.strip().split(".")
    node: Any = config
    for i, part in enumerate(parts[:-1]):
        here = ".".join(parts[: i + 1])
        if not isinstance(node, dict):
            raise ConfigError(here, f"cannot set {dotted!r}: {here} is not a mapping")
        if part not in node:
            if not _inside_spec(here):
                raise ConfigError(here, f"unknown key; allowed: {', '.join(node)}")
            node[part] = {}
        node = node[part]
    if not isinstance(node, dict):
        raise ConfigError(dotted, f"cannot set {dotted!r}: its parent is not a mapping")
    if parts[-1] not in node and not _inside_spec(dotted):
        raise ConfigError(dotted, f"unknown key; allowed: {', '.join(node)}")
    node[parts[-1]] = value


def _inside_spec(dotted: str) -> bool:
    return any(dotted == f or dotted.startswith(f + ".") for f in SPEC_FIELDS)


# ---------------------------------------------------------------------------------- validation
def validate(config: Mapping[str, Any]) -> None:
    """Check sections, keys, ranges and component specs; raise ConfigError on the first problem."""
    _check_keys(config, DEFAULTS, "")
    for section, defaults in DEFAULTS.items():
        if isinstance(defaults, dict) and section != "loss":
            if not isinstance(config[section], Mapping):
                raise ConfigError(section, f"expected a mapping, got {config[section]!r}")
            _check_keys(config[section], defaults, section)
    _check_values(config)
    _check_components(config)


def _check_keys(node: Mapping[str, Any], allowed: Mapping[str, Any], where: str) -> None:
    for key in node:
        if key not in allowed:
            field = f"{where}.{key}" if where else key
            raise ConfigError(field, f"unknown key; allowed: {', '.join(allowed)}")


def _require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise ConfigError(field, message)


def _number(config: Mapping[str, Any], dotted: str, *, minimum: float, integer: bool = False, allow_none: bool = False, exclusive: bool = False):
    parent, key = _parent(dict(config), dotted)
    value = parent[key]
    if value is None and allow_none:
        return
    kind = int if integer else (int, float)
    ok = isinstance(value, kind) and not isinstance(value, bool)
    ok = ok and (value > minimum if exclusive else value >= minimum)
    bound = f"> {minimum}" if exclusive else f">= {minimum}"
    _require(ok, dotted, f"expected {'an integer' if integer else 'a number'} {bound}{' or null' if allow_none else ''}, got {value!r}")


def _check_values(c: Mapping[str, Any]) -> None:
    from gspdml.data import eval_transform
    from gspdml.models.embedder import HEAD_POSITIONS
    from gspdml.models.feature_cache import FROZEN_ONLY

    _require(isinstance(c["name"], str) and c["name"] != "" and "/" not in c["name"], "name", f"expected a non-empty name without '/', got {c['name']!r}")
    _number(c, "seed", minimum=0, integer=True)
    _number(c, "data.classes_per_batch", minimum=1, integer=True)
    _number(c, "data.samples_per_class", minimum=1, integer=True)
    _number(c, "data.num_workers", minimum=0, integer=True)
    _number(c, "data.eval_batch_size", minimum=1, integer=True)
    eval_transform.parse_eval_transform(c["data"]["eval_transform"], "data.eval_transform")
    _require(c["data"]["sampler"] in ("balanced", "random"), "data.sampler",
             f"unknown sampler {c['data']['sampler']!r}; allowed: balanced, random")
    _require(not (c["data"]["sampler"] == "random" and c["data"]["halves"]), "data.halves",
             "class-disjoint halves need the balanced sampler (data.sampler: balanced)")
    if c["data"]["halves"]:
        _require(c["data"]["classes_per_batch"] % 2 == 0, "data.classes_per_batch",
                 f"must be even when data.halves is true (two class-disjoint halves), got {c['data']['classes_per_batch']}")
    _number(c, "model.embedding_dim", minimum=1, integer=True, allow_none=True)
    _require(c["model"]["head"] in (None, *HEAD_POSITIONS), "model.head",
             f"unknown head position {c['model']['head']!r}; allowed: null (the pooling's own), local (1x1 conv before pooling), global (linear after pooling)")
    _require(c["model"]["pooled_norm"] in (None, "layer_norm"), "model.pooled_norm",
             f"unknown pooled_norm {c['model']['pooled_norm']!r}; allowed: null, layer_norm")
    cache, backbone = c["model"]["cache_backbone_features"], c["model"]["backbone"]
    _require(isinstance(cache, bool), "model.cache_backbone_features", f"expected true or false, got {cache!r}")
    _require(not cache or (isinstance(backbone, Mapping) and backbone.get("frozen") is True), "model.cache_backbone_features",
             FROZEN_ONLY)
    opt = c["optimizer"]
    _require(opt["name"] in OPTIMIZERS, "optimizer.name", f"unknown optimizer {opt['name']!r}; allowed: {', '.join(OPTIMIZERS)}")
    _number(c, "optimizer.lr", minimum=0, exclusive=True)
    _number(c, "optimizer.weight_decay", minimum=0)
    _number(c, "optimizer.grad_clip_norm", minimum=0, exclusive=True, allow_none=True)
    _number(c, "optimizer.grad_clip_value", minimum=0, exclusive=True, allow_none=True)
    betas = opt["betas"]
    _require(isinstance(betas, (list, tuple)) and len(betas) == 2 and all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas),
             "optimizer.betas", f"expected two numbers in [0, 1), got {betas!r}")
    mult = opt["lr_multipliers"]
    _require(isinstance(mult, Mapping), "optimizer.lr_multipliers", f"expected a mapping, got {mult!r}")
    for key, value in mult.items():
        _require(key in DEFAULTS["optimizer"]["lr_multipliers"], f"optimizer.lr_multipliers.{key}",
                 f"unknown group; allowed: backbone, head, pooling (losses declare their own lr_multiplier)")
        _require(isinstance(value, (int, float)) and value >= 0, f"optimizer.lr_multipliers.{key}", f"expected a number >= 0, got {value!r}")
    _number(c, "schedule.max_steps", minimum=1, integer=True)
    _number(c, "schedule.warmup_steps", minimum=0, integer=True)
    decay = c["schedule"]["step_decay"]
    if decay is not None:
        _require(isinstance(decay, Mapping) and set(decay) in ({"every", "factor"}, {"milestones", "factor"}), "schedule.step_decay",
                 f"expected null, {{every: steps, factor: number}} or {{milestones: [steps], factor: number}}, got {decay!r}")
        if "every" in decay:
            _number(c, "schedule.step_decay.every", minimum=1, integer=True)
        else:
            _require(isinstance(decay["milestones"], list) and all(isinstance(m, int) and m >= 1 for m in decay["milestones"]),
                     "schedule.step_decay.milestones", f"expected a list of steps >= 1, got {decay['milestones']!r}")
        _number(c, "schedule.step_decay.factor", minimum=0, exclusive=True)
        _require(c["schedule"]["plateau"] is None, "schedule.step_decay", "use either schedule.plateau or schedule.step_decay, not both")
    plateau = c["schedule"]["plateau"]
    if plateau is not None:
        _require(isinstance(plateau, Mapping), "schedule.plateau", f"expected null or a mapping, got {plateau!r}")
        _check_keys(plateau, PLATEAU_KEYS, "schedule.plateau")
        factor = plateau.get("factor", PLATEAU_KEYS["factor"])
        _require(isinstance(factor, (int, float)) and 0 < factor < 1, "schedule.plateau.factor", f"expected a number in (0, 1), got {factor!r}")
        patience = plateau.get("patience", PLATEAU_KEYS["patience"])
        _require(isinstance(patience, int) and patience >= 1, "schedule.plateau.patience", f"expected an integer >= 1, got {patience!r}")
    from gspdml.evaluation.postprocess import parse_steps
    from gspdml.evaluation.selection import SELECTION_METRICS, check_selection_metric, needs_clustering

    ev = c["evaluation"]
    _number(c, "evaluation.every", minimum=1, integer=True)
    _require(ev["split"] in ("val", "test"), "evaluation.split", f"unknown split {ev['split']!r}; allowed: val, test")
    check_selection_metric(ev["metric"], "evaluation.metric")
    _number(c, "evaluation.patience", minimum=1, integer=True, allow_none=True)
    ks = ev["recall_at"]
    _require(isinstance(ks, list) and all(isinstance(k, int) and k >= 1 for k in ks), "evaluation.recall_at", f"expected a list of integers >= 1, got {ks!r}")
    parse_steps(ev["postprocess"], "evaluation.postprocess")
    select_pp = ev["select_postprocessed"]
    _require(isinstance(select_pp, bool), "evaluation.select_postprocessed", f"expected true or false, got {select_pp!r}")
    _require(not select_pp or bool(ev["postprocess"]), "evaluation.select_postprocessed",
             "true needs post-processing steps in evaluation.postprocess (it selects by the post-processed metric)")
    _require(not (select_pp and needs_clustering(ev["metric"])), "evaluation.select_postprocessed",
             f"{ev['metric']} clusters the plain embeddings, post-processing has no clustering; select post-processed "
             f"rounds by one of {', '.join(m for m in SELECTION_METRICS if not needs_clustering(m))}")
    tr = c["trainer"]
    _require(tr["precision"] in PRECISIONS, "trainer.precision", f"unknown precision {tr['precision']!r}; allowed: {', '.join(PRECISIONS)}")
    _require(tr["device"] == "auto" or isinstance(tr["device"], str), "trainer.device", f"expected 'auto', 'cpu' or 'cuda[:i]', got {tr['device']!r}")
    _number(c, "trainer.log_every", minimum=1, integer=True)
    _require(isinstance(tr["keep_freed_memory"], bool), "trainer.keep_freed_memory",
             f"expected true or false, got {tr['keep_freed_memory']!r}")
    _number(c, "trainer.checkpoint_every", minimum=1, integer=True, allow_none=True)
    _require(tr["tensorboard"] in TENSORBOARD, "trainer.tensorboard",
             f"expected one of {', '.join(map(str, TENSORBOARD))} (auto: when the tensorboard package is installed), "
             f"got {tr['tensorboard']!r}")
    _require(isinstance(tr["progress"], bool), "trainer.progress", f"expected true or false, got {tr['progress']!r}")
    _require(tr["distributed"] in ("auto", "off"), "trainer.distributed",
             f"unknown value {tr['distributed']!r}; allowed: auto (torch.distributed when launched by torchrun), off")


def _check_components(c: Mapping[str, Any]) -> None:
    # Imported here: the registries fill up as the packages are imported.
    from gspdml.data import DATASETS
    from gspdml.losses import check_loss
    from gspdml.models.backbones import BACKBONES
    from gspdml.pooling import POOLINGS

    from gspdml.losses import build_loss
    from gspdml.pooling import build_pooling

    DATASETS.check(c["data"]["dataset"], "data.dataset")
    BACKBONES.check(c["model"]["backbone"], "model.backbone")
    POOLINGS.check(c["model"]["pooling"], "model.pooling")
    check_loss(c["loss"], "loss")
    # Poolings and losses are cheap to build: building them here turns their own value checks
    # (e.g. GSP's mu in (0, 1]) into errors before any data is read or any model is built.
    dim = c["model"]["embedding_dim"] or 8
    with _field_prefix("model.pooling"):
        build_pooling(c["model"]["pooling"], in_channels=dim)
    with _field_prefix("loss"):
        build_loss(c["loss"], "loss", embedding_dim=dim, num_classes=2)


@contextlib.contextmanager
def _field_prefix(prefix: str):
    """Re-raise a component's own ConfigError with the config path in front of its field."""
    try:
        yield
    except ConfigError as exc:
        if exc.field.startswith(prefix):
            raise
        field = f"{prefix}.{exc.field}" if exc.field else prefix
        raise ConfigError(field, str(exc).split(": ", 1)[-1] if exc.field else str(exc)) from None
