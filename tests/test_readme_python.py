"""The README's Python section is run as written: the library calls it shows work and give what it says."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"


def _python_section() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the Python section holds one code block"
    return blocks[0]


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")
def test_the_readme_python_section_runs(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")  # "../shared/fixtures/..." as from the project root
    monkeypatch.chdir(work)
    code = _python_section()
    exec(compile(code, "README.md#python", "exec"), {"__name__": "__readme__"})  # our own text, not a model's
    assert (work / "runs" / "oracle" / "metrics.json").is_file()
    assert (work / "ledger.jsonl").is_file() and os.path.getsize(work / "ledger.jsonl") > 0


def test_the_section_is_found():
    assert "toolwild.evaluate(" in _python_section()
