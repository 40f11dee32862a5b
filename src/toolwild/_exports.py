"""How a toolwild package states its public names: each package's ``__init__`` lists them (``__all__``) and where
each is defined, and imports a module only when one of its names is first asked for (PEP 562).

Why lazily: a package ``__init__`` that imported its modules would make every ``import toolwild.x.y`` load the whole
package (the CLI starts for every command) and would tie modules that import one another through their package into
circles. Why curated: the names a package lists are its public surface; its modules are internal and may move.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names are ``exports`` (name -> the module that
    defines it, relative to ``package`` when it starts with a dot); a name, once loaded, is kept in ``namespace``
    (the package's globals) so later lookups cost nothing."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
