"""Test-suite setup shared by every directory.

Tests have no ``__init__.py`` files, so shared helpers (fake servers, builders) live in ``tests/helpers`` and are
imported as top-level modules (``from fake_openai import FakeOpenAI``); this puts that directory on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HELPERS = str(Path(__file__).resolve().parent / "helpers")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)
