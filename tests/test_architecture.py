"""The public API and the shape of the import graph: the layer rule (a module imports only from its own layer or
below; :data:`LAYERS`, defined here, is the rule's only statement), no import circles, and one exception tree.

Why tests: each of these is a property of the whole code base that no single change sees; a circle hidden by a
lazy import, or an exception a caller's ``except ToolwildError`` would miss, costs nothing until it bites.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolwild
import toolwild.errors

SRC = Path(__file__).resolve().parents[1] / "src" / "toolwild"
# lower index = lower layer; a module may import from its own layer or any lower one
LAYERS = [
    *("errors", "core", "llm", "envs", "run", "synth", "eval", "rl", "report", "export", "train", "serve", "jobs"),
    "cli",
]


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "toolwild" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def test_public_api_is_sorted_and_complete():
    assert toolwild.__all__ == sorted(toolwild.__all__)
    for name in toolwild.__all__:
        assert hasattr(toolwild, name), name


def test_imports_point_down_only():
    violations = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts)
        own = _layer(module)
        if own is None:
            continue
        for node in ast.walk(_tree(path)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                layer = _layer(target)
                if layer is not None and layer > own:
                    violations.append(f"{module} imports {target}")
    assert violations == []


# ---------------------------------------------------------------------------------------------------- the graph
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, not ``...__init__``)."""
    found: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """(what is imported, its local name) for every import anywhere in a module, lazy ones inside functions and
    ``TYPE_CHECKING`` blocks included: ``from pkg import name`` is the module ``pkg.name`` when that file exists,
    else ``pkg:name`` (a name defined in ``pkg``); relative imports are resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, alias.asname or alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield (target if target in modules else f"{base}:{alias.name}"), alias.asname or alias.name


def _import_graph() -> dict[str, set[str]]:
    """Module -> the toolwild modules it imports (an import of a name counts as its module)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        for target, _ in _imports(module, path, modules):
            name = target.partition(":")[0]
            while name and name not in modules:  # ``import a.b.c`` of a name inside a.b: the module a.b
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module: modules that import each other, directly or
    through others (a few hundred modules: reachability from each one is fast enough and obviously right)."""
    reach = {module: _reachable(graph, module) for module in graph}
    circles = {frozenset({m, *(o for o in reach[m] if m in reach[o])}) for m in graph if m in reach[m]}
    return sorted(sorted(c) for c in circles if len(c) > 1)


def test_no_import_circles():
    """A circle makes import order matter and is usually hidden by a lazy import; what both sides need belongs in a
    module below both."""
    circles = _circles(_import_graph())
    for circle in circles:
        print("import circle:", " <-> ".join(circle))
    assert circles == []


def test_the_circle_finder_finds_a_circle_through_a_third_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------------- exceptions
ROOT = "toolwild.errors.ToolwildError"
PLAIN_EXCEPTIONS = {
    "toolwild.core.jsonl._NotJson": "raised by the JSON parser's constant hook, caught in the same module",
    "toolwild.llm.backends.transport._Stale": "a reused connection found closed, caught by the retry in the module",
    "toolwild.eval.interactive._UserFailed": "stops an interactive session, caught in the same module",
    "toolwild.synth.providers.ledger.builder._DeadEnd": "no template fits: the builder retries, in the same module",
}
"""Private signals that never leave their module, so no caller catches them as toolwild errors (with why)."""


def _classes() -> dict[str, list[str]]:
    """Every class of the package (nested ones too), ``module.Name`` -> its bases, each where it is defined: a
    toolwild class as ``module.Name`` (followed through re-exports), a builtin by its name, any other by its import."""
    modules = _modules()
    imported = {m: {local: t.replace(":", ".") for t, local in _imports(m, p, modules)} for m, p in modules.items()}
    classes: dict[str, list[ast.expr]] = {}
    for module, path in modules.items():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                classes[f"{module}.{node.name}"] = node.bases

    def resolve(module: str, name: str) -> str:
        if f"{module}.{name}" in classes:
            return f"{module}.{name}"
        head, dot, rest = name.partition(".")
        target = imported[module].get(head)
        if target is None:
            return name  # a builtin
        owner, _, short = (f"{target}.{rest}" if dot else target).rpartition(".")
        return resolve(owner, short) if owner in imported else f"{owner}.{short}"

    return {
        q: [resolve(q.rpartition(".")[0], ast.unparse(b)) for b in bases if isinstance(b, ast.Name | ast.Attribute)]
        for q, bases in classes.items()
    }


def _is_foreign_exception(name: str) -> bool:
    """Whether a base from outside toolwild (a builtin, or ``package.Name``) is an exception class."""
    owner, _, short = name.rpartition(".")
    try:
        value = getattr(importlib.import_module(owner) if owner else builtins, short, None)
    except ImportError:  # an optional package that is not installed: its classes are not checked here
        return False
    return isinstance(value, type) and issubclass(value, BaseException)


@functools.cache
def _exceptions() -> dict[str, set[str]]:
    """Every exception class of the package, with all its ancestors."""
    classes = _classes()

    def ancestors(name: str) -> set[str]:
        return {a for base in classes.get(name, []) for a in (base, *ancestors(base))}

    found = {q: ancestors(q) for q in classes}
    return {q: a for q, a in found.items() if any(_is_foreign_exception(b) for b in a if b not in classes)}


def test_every_exception_is_a_toolwild_error():
    """A caller that catches ``ToolwildError`` must catch every error toolwild raises; only private signals that never
    leave their module may be plain exceptions (:data:`PLAIN_EXCEPTIONS`)."""
    exceptions = _exceptions()
    assert {"toolwild.synth.sessions.Unanswerable", "toolwild.envs.patch.PatchError"} <= set(exceptions)  # the scan
    plain = sorted(q for q, ancestors in exceptions.items() if ROOT not in ancestors and q != ROOT)
    assert plain == sorted(PLAIN_EXCEPTIONS)


def test_every_toolwild_error_is_drawn_in_the_tree():
    """The tree in :mod:`toolwild.errors`' docstring is where a caller learns what to catch: it must be complete."""
    tree = toolwild.errors.__doc__ or ""
    missing = [
        q for q, ancestors in _exceptions().items() if ROOT in ancestors and f" {q.rpartition('.')[2]} " not in tree
    ]
    assert missing == []


def _packages() -> list[str]:
    """Every package of toolwild (a folder with an ``__init__.py``)."""
    return sorted(
        ".".join(init.parent.relative_to(SRC.parent).parts)
        for init in SRC.rglob("__init__.py")
        if "__pycache__" not in init.parts
    )


@pytest.mark.parametrize("package", _packages())
def test_every_package_curates_its_public_names(package):
    """Issue #30: the public surface is what each package's ``__init__`` lists, every other module is internal. A
    listed name must resolve (a module that moved breaks this test, not a user), and a package that exports
    lazily (:mod:`toolwild._exports`) lists exactly the names it maps."""
    module = importlib.import_module(package)
    assert ast.get_docstring(ast.parse((SRC.parent / package.replace(".", "/") / "__init__.py").read_text()))
    public = getattr(module, "__all__", None)
    if public is None:  # a package of modules only (a domain's folder, the CLI): nothing exported by name
        assert package in UNLISTED, f"{package} lists no __all__"
        return
    assert len(public) == len(set(public))
    for name in public:
        assert getattr(module, name, None) is not None, f"{package}.{name}"
    exports = getattr(module, "_EXPORTS", None)
    if exports is not None:
        assert set(exports) == set(public)


UNLISTED = {"toolwild.cli", "toolwild.envs.domains", "toolwild.synth.providers"}
"""Packages that export nothing by name: the CLI (its surface is the command), and folders of domains and of
providers, each a package of its own that does."""
