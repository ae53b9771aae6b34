"""Outside the config package (``src/gspdml/config``, ``src/gspdml/settings``) no code reads a
run config, a section, a recipe or a component spec by string key: code takes the typed section
(``config.data.halves``), a frozen dataclass of a recipe, or a built component's attributes.

The rule, on the syntax tree of every module of ``src/gspdml``: a subscript by a string
(``spec["mu"]``) or a ``.get("mu", ...)`` call whose receiver is named like a config (a name or
attribute matching :data:`CONFIG_NAME`: ``config``, ``run_config``, ``cfg``, ``section``,
``spec``, ``loss_spec``, ``options``, ``recipe``, ``settings``, ``preset``, a search ``space``,
a component's ``dataset``/``backbone``/``pooling``/``loss`` spec, a variable holding a section:
``model``, ``data``, ``trainer``, ...), or is an attribute of
one (``config.data.dataset["name"]``), or is such a read itself (``recipe["train"]["lr"]``), or
the mapping form of one (``config.to_dict()["x"]``, ``plain(spec)["x"]``). Reads of JSON documents that are not configs (``results["metrics"]``,
a metrics.jsonl ``row``, a checkpoint's ``state``, a ``manifest``) are named otherwise and
outside the rule.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gspdml"
#: the config package, the one place that reads configs by key, and the spec parser
#: (:func:`gspdml.registry.parse_spec`, the one reader of the ``{name: ..., **options}`` form)
EXEMPT = ("config", "settings", "registry.py")
#: a receiver named like a config, a section, a recipe or a component spec
CONFIG_NAME = re.compile(
    r"^((.*_)?(config|configs|cfg|conf|section|spec|specs|options|opts|recipe|recipes|"
    r"settings|setting|preset|hparams|hyperparameters|space)|dataset|backbone|pooling|loss)$"
)
#: a variable (not an attribute: ``index.model`` is a document) named like a config section
SECTION_VARIABLE = re.compile(r"^(model|data|trainer|optimizer|schedule)$")
#: calls whose result is a config in mapping form when their argument is one
MAPPING_FORMS = ("to_dict", "plain", "asdict", "dict", "vars")


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_config(node: ast.AST) -> bool:
    """Whether ``node`` evaluates to a config, a section, a recipe or a spec (by its name)."""
    if CONFIG_NAME.match(_name(node)):
        return True
    if isinstance(node, ast.Name) and SECTION_VARIABLE.match(node.id):  # model["backbone"]
        return True
    if isinstance(node, ast.Attribute):  # config.data.dataset: a part of a config is one
        return _is_config(node.value)
    if isinstance(node, ast.BoolOp):  # (spec or {})
        return any(_is_config(value) for value in node.values)
    if isinstance(node, ast.IfExp):
        return _is_config(node.body) or _is_config(node.orelse)
    if isinstance(node, ast.Subscript):  # recipe["train"]: a part of a config is one
        return _key(node) is not None and _is_config(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        if _name(func) == "get" and isinstance(func, ast.Attribute):  # cfg.get("x", {})
            return _is_config(func.value)
        if _name(func) in MAPPING_FORMS:
            target = func.value if isinstance(func, ast.Attribute) and not node.args else None
            args = [target] if target is not None else node.args
            return any(_is_config(arg) for arg in args)
    return False


def _key(node: ast.Subscript) -> str | None:
    key = node.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def untyped_reads(path: Path) -> list[str]:
    """``file:line: code`` of every read by string key of a config-named mapping in ``path``."""
    text = path.read_text()
    lines = text.splitlines()
    found = set()
    for node in ast.walk(ast.parse(text)):
        read = None
        if isinstance(node, ast.Subscript) and _key(node) is not None:
            if _is_config(node.value) and not isinstance(node.ctx, ast.Store):
                read = node
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _is_config(node.func.value)
        ):
            read = node
        if read is not None:
            where = path.relative_to(SRC.parent)
            found.add((str(where), read.lineno, lines[read.lineno - 1].strip()))
    return [f"{file}:{line}: {code}" for file, line, code in sorted(found)]


def _modules() -> list[Path]:
    return sorted(
        path for path in SRC.rglob("*.py") if path.relative_to(SRC).parts[0] not in EXEMPT
    )


def test_no_module_reads_a_config_by_string_key():
    offending = [read for path in _modules() for read in untyped_reads(path)]
    assert not offending, (
        f"{len(offending)} reads of a config, section, recipe or spec by string key outside "
        "gspdml.config / gspdml.settings (take the typed section, a frozen dataclass or the "
        "built component's attribute):\n" + "\n".join(offending)
    )


def test_the_rule_catches_config_reads_and_leaves_documents_alone(tmp_path):
    module = tmp_path / "gspdml" / "m.py"
    module.parent.mkdir()
    module.write_text(
        "def f(config, loss_spec, recipe, results, row, state):\n"
        "    a = config['data']['halves']\n"
        "    b = loss_spec.get('mu', 0.3)\n"
        "    c = recipe['train']['lr']\n"
        "    d = config.to_dict()['seed']\n"
        "    e = self.cfg.get('x', {}).get('y')\n"
        "    f = results['metrics'], row.get('step'), state['model']\n"
        "    g = config.data.halves\n"
        "    h = (config.data.dataset or {}).get('val_fold')\n"
        "    i = config.evaluation['clustering']\n"
    )
    global SRC
    saved, SRC = SRC, tmp_path / "gspdml"
    try:
        lines = [read.split(":")[1] for read in untyped_reads(module)]
    finally:
        SRC = saved
    assert lines == ["2", "3", "4", "5", "6", "9", "10"]
