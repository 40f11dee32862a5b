"""Issue #32: the README's RL example did not say how to drive it (a `my_policy` nobody defines) nor what a step's
`verdict` and `task_index` hold. The example now drives the oracle's steps; this runs it as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from toolwild.synth.providers.ledger import write_ledger_suite

README = Path(__file__).resolve().parents[2] / "README.md"


def _rl_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Sessions as an RL environment") :]
    (code,) = re.findall(r"```python\n(.*?)```", section[: section.index("\n## ")], flags=re.S)
    return code


def test_the_readme_rl_example_runs_as_written_and_the_oracle_earns_every_task(tmp_path, monkeypatch):
    write_ledger_suite(tmp_path / "ledger.jsonl", n_sessions=1)  # what its comment says to run first
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(_rl_example(), "README.md (RL example)", "exec"), namespace)  # our own documentation's code
    assert namespace["total"] == 4.0
    result = namespace["result"]
    assert result.done and result.task_index == 4  # past the last task once done
    assert [str(v.label) for v in result.verdict] == ["correct"] * 4
    assert out.getvalue().startswith("4.0")
