"""Writing files so that a kill never leaves half of one: write a temporary file beside it, then rename."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["write_json", "write_text_atomic"]


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Replace ``path`` with ``text`` in one rename (the temporary file is removed if the write fails)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, value: object) -> Path:
    """Indented JSON, written atomically."""
    return write_text_atomic(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")
