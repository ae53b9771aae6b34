"""Only the command-line layer parses arguments (docs/design.md, "A command")."""

import ast
from pathlib import Path

import gspdml

PACKAGE = Path(gspdml.__file__).parent


def modules_importing(name: str) -> list[str]:
    """Modules of the package, relative to it, that import ``name`` (at any depth in the file)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(module.split(".")[0] == name for module in imported):
                found.append(path.relative_to(PACKAGE).as_posix())
                break
    return found


def test_argparse_is_imported_only_by_the_cli_package():
    importers = modules_importing("argparse")
    assert importers, "the scan found no argparse import at all: it is not reading the package"
    outside = [module for module in importers if not module.startswith("cli/")]
    assert not outside, f"argparse outside gspdml/cli: {outside}"
