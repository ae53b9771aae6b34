"""Reading a run config: YAML files and presets, ``base`` includes, command-line overrides.

The file (or the shipped preset of that name, :func:`preset_path`) is read with its ``base``
includes (YAML files relative to the including file, merged in order, the file itself on top),
merged over the schema's defaults, and the overrides ``key.sub=value`` (YAML values) are applied:
a plain mapping that :func:`gspdml.config.load_config` checks against the schema. An override
names an entry of a list by its position, ``loss[1].margin=0.2``: the key by which validation,
``--resume`` and ``gspdml diff`` name an option of a list of losses, so a printed key can be
pasted back.

Component specs (``data.dataset``, ``model.backbone``, ``model.pooling``, ``loss``) are brought
to the canonical ``{name: ..., **options}`` form so overrides can address their options
(``model.pooling.mu=0.2``); in a file, a spec mapping without a name (``pooling: {mu: 0.2}``)
updates the options of the spec it builds on.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Union

import yaml

from gspdml.errors import ConfigError, did_you_mean, printable
from gspdml.registry import parse_spec

#: fields whose value is a registry spec (free-form options below them)
SPEC_FIELDS = ("data.dataset", "model.backbone", "model.pooling", "loss")

Source = Union[str, Path, Mapping[str, Any]]

#: the presets shipped with the package (``gspdml train demo-gsp`` works from any directory)
PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"

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
    raise ConfigError(
        "",
        f"config file not found: {path.resolve()} (and no preset named {name!r}"
        f"{did_you_mean(name, preset_names())}; gspdml list presets shows them all)",
    )


#: at most this many nodes in one config once its aliases are expanded: a few nested anchors
#: (``&a [*b, *b]``) can otherwise stand for billions of nodes, which anything that walks the
#: result (a dump, a report) would expand (a "billion laughs" file)
MAX_EXPANDED_NODES = 100_000


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type information
    """Safe YAML that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``), refuses a key
    given twice in one mapping (the last would silently win) and a document larger than
    :data:`MAX_EXPANDED_NODES` nodes with its aliases expanded."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        sizes: dict[int, int] = {}
        if _expanded_size(node, sizes) > MAX_EXPANDED_NODES:
            raise yaml.YAMLError(
                f"its aliases (*name) expand to more than {MAX_EXPANDED_NODES} nodes"
            )
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str | int | float | bool] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.YAMLError(f"key {key!r} given twice in one mapping{key_node.start_mark}")
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return super().construct_mapping(node, deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """Nodes under ``node`` with every alias expanded (memoised: an alias is counted in full
    wherever it stands, computed once)."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a cycle (a node inside itself) counts once
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        sizes[id(node)] = 1 + sum(
            min(_expanded_size(c, sizes), MAX_EXPANDED_NODES + 1) for c in children
        )
    return sizes[id(node)]


#: how many distinct texts :func:`parse_yaml` keeps parsed, each of at most
#: :data:`PARSED_TEXT_CHARS` characters (a preset is a few kB): the presets share their ``base``
#: files, so a process that reads many presets (``gspdml reproduce``, a sweep) parses each once
PARSED_TEXTS = 1024
PARSED_TEXT_CHARS = 16_384


def parse_yaml(text: str) -> Any:
    """The data of a YAML config (see :class:`_Loader`), a fresh copy on every call; a
    :class:`yaml.YAMLError` names what is wrong, also for nesting too deep to read."""
    if len(text) > PARSED_TEXT_CHARS:
        return _parsed.__wrapped__(text)
    return copy.deepcopy(_parsed(text))


@functools.lru_cache(maxsize=PARSED_TEXTS)
def _parsed(text: str) -> Any:
    """The data of ``text``, parsed once (a refused text is not remembered: it raises each time)."""
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read (thousands of levels)") from None


#: the longest chain of ``base`` includes read
MAX_INCLUDE_DEPTH = 32
#: the most files one config reads with its includes (a list of bases repeated at every level
#: would otherwise multiply: three files listing 1,000 bases each are read 10**9 times)
MAX_INCLUDED_FILES = 256
#: the largest config file read (a preset is a few kB; :data:`MAX_EXPANDED_NODES` nodes fit)
MAX_CONFIG_BYTES = 1 << 20


def read_config_text(path: Path) -> str:
    """The text of the config file ``path`` (a config, a base, a run's ``config.yaml``), or a
    :class:`ConfigError` naming it: unreadable, larger than :data:`MAX_CONFIG_BYTES`, or not
    UTF-8."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError("", f"{path}: cannot read the config ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            "",
            f"{path}: more than {MAX_CONFIG_BYTES} bytes, not a run config (a preset is a few kB)",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "",
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at position {exc.start}); "
            "save it as UTF-8",
        ) from None


def read_config(
    source: Source, defaults: Mapping[str, Any], overrides: Iterable[str] = ()
) -> dict[str, Any]:
    """``source`` with its bases merged over ``defaults`` and ``overrides`` applied, specs canonical."""
    config = merge(copy.deepcopy(dict(defaults)), _read_with_bases(source, seen=()))
    for item in overrides:
        _apply_override(config, item)
    canonicalise_specs(config, partial=False)
    return config


def _read_with_bases(
    source: Source, seen: tuple[Path, ...], read: list[Path] | None = None
) -> dict[str, Any]:
    """``source`` merged over its bases; ``seen``: the chain of files including it, ``read``:
    every file read so far for this config (:data:`MAX_INCLUDED_FILES` at most)."""
    read = [] if read is None else read
    if isinstance(source, Mapping):
        data, here = copy.deepcopy(dict(source)), Path.cwd()
    else:
        path = preset_path(source).resolve()
        if path in seen:
            raise ConfigError("base", f"include cycle: {' -> '.join(map(str, (*seen, path)))}")
        if len(seen) >= MAX_INCLUDE_DEPTH:
            raise ConfigError(
                "base",
                f"{seen[0]} includes files {MAX_INCLUDE_DEPTH} deep ({seen[0].name} -> "
                f"{seen[1].name} -> ... -> {seen[-1].name} -> {path.name}); a config builds on "
                "a few bases: merge the chain into fewer files",
            )
        read.append(path)
        if len(read) > MAX_INCLUDED_FILES:
            raise ConfigError(
                "base",
                f"{read[0]} includes more than {MAX_INCLUDED_FILES} files in all ({path.name} "
                f"{read.count(path)} times); a config builds on a few bases: list each once",
            )
        try:
            data = parse_yaml(read_config_text(path))
        except yaml.YAMLError as exc:
            raise ConfigError("", f"{path}: not valid YAML ({exc})") from None
        if data is None:  # an empty file (or comments only): the defaults
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(
                "", f"{path}: expected a mapping at the top level, got {type(data).__name__}"
            )
        here, seen = path.parent, (*seen, path)
    bases = data.pop("base", None)
    if bases is None:  # no includes (an empty `base:` too)
        bases = []
    if isinstance(bases, (str, os.PathLike)):
        bases = [bases]
    if not isinstance(bases, list) or not all(
        isinstance(base, os.PathLike) or (isinstance(base, str) and base) for base in bases
    ):
        where = f"{seen[-1]}: " if seen and not isinstance(source, Mapping) else ""
        raise ConfigError(
            "base",
            f"{where}expected a config file or preset name, or a list of them; got "
            f"{printable(repr(bases))[:120]} (write base: other.yaml, or base: [a.yaml, b.yaml])",
        )
    canonicalise_specs(data, partial=True)
    merged: dict[str, Any] = {}
    for base in bases:
        # relative to the including file; else a shipped preset (a user's config may build on one)
        local = here / base
        merged = merge(merged, _read_with_bases(local if local.is_file() else base, seen, read))
    return merge(merged, data)


def merge(into: dict[str, Any], update: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Deep merge of mappings; a spec that names another component replaces the old one whole."""
    for key, value in update.items():
        field = f"{where}.{key}" if where else key
        current = into.get(key)
        renamed = (
            field in SPEC_FIELDS
            and isinstance(current, Mapping)
            and isinstance(value, Mapping)
            and current.get("name") != value.get("name", current.get("name"))
        )
        if isinstance(current, dict) and isinstance(value, Mapping) and not renamed:
            into[key] = merge(current, value, field)
        else:
            into[key] = copy.deepcopy(value)
    return into


def canonicalise_specs(config: dict[str, Any], *, partial: bool) -> None:
    """Specs to ``{name: ..., **options}``; with ``partial``, a mapping without a name that is not
    the ``{gsp: {options}}`` form is kept as an update of the options it will be merged into."""
    for field in SPEC_FIELDS:
        section, _, key = field.rpartition(".")
        parent = config.get(section) if section else config
        if not isinstance(parent, dict) or not isinstance(parent.get(key), (str, Mapping)):
            continue
        spec = parent[key]
        if partial and isinstance(spec, Mapping) and "name" not in spec and not _named_form(spec):
            continue
        name, kwargs = parse_spec(spec, field)
        parent[key] = {"name": name, **kwargs}


def _named_form(spec: Mapping[str, Any]) -> bool:
    """``{gsp: {mu: 0.2}}`` (or ``{gsp: null}``): one key whose value is a mapping of options."""
    return len(spec) == 1 and all(v is None or isinstance(v, Mapping) for v in spec.values())


#: one segment of an override's key: a name, then the positions of list entries (``loss[1]``)
_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[[0-9]+\])*)")
#: a step of an override's path: a mapping's key or a list's position
Step = Union[str, int]


def _override_path(dotted: str) -> list[Step]:
    """The steps of an override's key: ``loss[1].base.margin`` -> ``["loss", 1, "base",
    "margin"]``, the form in which validation, ``--resume`` and ``gspdml diff`` name an option
    of a list of losses (:func:`gspdml.training.component_options.option_keys`)."""
    steps: list[Step] = []
    for segment in dotted.strip().split("."):
        match = _SEGMENT.fullmatch(segment)
        if match is None:
            raise ConfigError(
                dotted.strip(),
                "an override's key is of the form key.sub (key[i].sub for the entry i of a "
                "list, loss[1].margin)",
            )
        steps += [match[1], *(int(i) for i in re.findall(r"[0-9]+", match[2]))]
    return steps


def _path_text(steps: Iterable[Step]) -> str:
    """Steps as the key that names them: ``loss[1].base``."""
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


def _spec_path(steps: Iterable[Step]) -> str:
    """The field of a path without its list positions (``loss[1].base`` -> ``loss.base``)."""
    return ".".join(step for step in steps if isinstance(step, str))


def _child(node: Any, steps: list[Step], dotted: str) -> Any:
    """The value at the last of ``steps`` below ``node`` (the value at the steps before it), an
    empty mapping made for an option inside a component spec; a spec entered on its way to one
    of its options is brought to ``{name: ..., **options}`` (``c2`` or ``{c2: {...}}`` in a list
    of losses, a wrapper's ``base``)."""
    step, here, parent = steps[-1], _path_text(steps), _path_text(steps[:-1])
    if isinstance(step, int):
        if not isinstance(node, list):
            raise ConfigError(parent, f"cannot set {dotted!r}: {parent} is not a list")
        if step >= len(node):
            raise ConfigError(
                here,
                f"cannot set {dotted!r}: {parent} has {len(node)} entries (0 to {len(node) - 1})",
            )
    else:
        if not isinstance(node, dict):
            raise ConfigError(parent, f"cannot set {dotted!r}: {parent} is not a mapping")
        if step not in node:
            if not _inside_spec(_spec_path(steps)):
                suggestion = did_you_mean(step, list(node))
                raise ConfigError(here, f"unknown key{suggestion}; allowed: {', '.join(node)}")
            node[step] = {}
    child = node[step]
    entered = isinstance(child, str) or (
        isinstance(child, Mapping) and "name" not in child and _named_form(child)
    )
    if entered and _inside_spec(_spec_path(steps)):
        name, options = parse_spec(child, here)
        child = node[step] = {"name": name, **options}
    return child


def _apply_override(config: dict[str, Any], item: str) -> None:
    """Set the value of one ``key.sub=value`` override (YAML value; ``key[i]`` is the entry i of
    a list: ``loss[1].margin``)."""
    if "=" not in item:
        raise ConfigError("", f"override {item!r} is not of the form key.sub=value")
    dotted, text = item.split("=", 1)
    try:
        value = parse_yaml(text)
    except yaml.YAMLError:
        value = text
    steps = _override_path(dotted)
    node: Any = config
    for i in range(1, len(steps)):
        node = _child(node, steps[:i], dotted)
    last = steps[-1]
    if isinstance(last, int):
        _child(node, steps, dotted)  # the entry exists
    elif not isinstance(node, dict):
        raise ConfigError(dotted, f"cannot set {dotted!r}: its parent is not a mapping")
    elif last not in node and not _inside_spec(_spec_path(steps)):
        suggestion = did_you_mean(last, list(node))
        raise ConfigError(dotted, f"unknown key{suggestion}; allowed: {', '.join(node)}")
    node[last] = value


def _inside_spec(dotted: str) -> bool:
    return any(dotted == f or dotted.startswith(f + ".") for f in SPEC_FIELDS)
