"""The public API and the layer rule of architecture.md: a module imports only from its own layer or below."""

from __future__ import annotations

import ast
from pathlib import Path

import toolwild

SRC = Path(__file__).resolve().parents[1] / "src" / "toolwild"
# lower index = lower layer; a module may import from its own layer or any lower one
LAYERS = ["errors", "core", "llm", "envs", "run", "synth", "eval", "rl", "report", "export", "serve", "cli"]


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
        for node in ast.walk(ast.parse(path.read_text())):
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
