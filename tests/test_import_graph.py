"""The package's import graph has no cycle, and every module is reachable by its own name
(docs/design.md, "Layers").

``lint-imports`` (run by ``make test``) checks that no import runs up the layers; a cycle inside
one layer, or through the package root, it does not see. This test builds the graph with grimp
(import-linter's graph library, lazy imports inside functions included) and asks, for every
direct import, whether a chain of imports leads back.
"""

import importlib
import pkgutil
import sys

import grimp

import gspdml


def imports_on_a_cycle(graph) -> list[tuple[str, str]]:
    """The direct imports ``(importer, imported)`` that lie on a cycle: those whose imported
    module leads back to its importer through some chain of imports."""
    return sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )


def test_cycle_finder_finds_a_planted_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert imports_on_a_cycle(graph) == [("a.x", "a.y"), ("a.y", "a.x")]


def test_gspdml_has_no_import_cycle():
    graph = grimp.build_graph("gspdml", cache_dir=None)
    assert len(graph.modules) > 100, "the graph misses most of the package"
    found = imports_on_a_cycle(graph)
    assert not found, f"imports on a cycle: {found}"


def hidden_modules(package) -> list[str]:
    """Modules ``package.x`` for which the attribute ``x`` of the package is something else (say a
    function re-exported under the module's name), so ``import package.x as m`` and
    ``package.x`` disagree. Walks sub-packages; skips ``__main__``."""
    hidden = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == "__main__":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if getattr(package, info.name, module) is not module:
            hidden.append(module.__name__)
        if info.ispkg:
            hidden += hidden_modules(module)
    return hidden


def test_hidden_module_finder_flags_a_shadowing_function(tmp_path, monkeypatch):
    root = tmp_path / "shadowpkg"
    root.mkdir()
    (root / "knn.py").write_text("def knn():\n    return 1\n")
    (root / "metrics.py").write_text("VALUE = 2\n")
    (root / "__init__.py").write_text(
        "from shadowpkg.knn import knn\nfrom shadowpkg import metrics\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert hidden_modules(importlib.import_module("shadowpkg")) == ["shadowpkg.knn"]
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "shadowpkg"]:
            del sys.modules[name]


def test_no_package_attribute_hides_a_module():
    assert hidden_modules(gspdml) == []
