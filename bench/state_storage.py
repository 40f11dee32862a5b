"""Expected states stored as a digest and a change (issue #34): the same checks as whole states, in fewer bytes.

Given a suite written with whole expected states (``expected_states``, before issue #34) and the same suite written
since (``expected_state_digests`` and ``expected_state_changes``), checks that only the storage differs:

- every session record is the same once the expected-state keys are left out (sessions, calls, observations);
- every task's digest is the digest of the whole state the old file holds (the state check is the same);
- the changes, applied to the environment's state at reset, rebuild each whole state exactly (the diagnostics are
  the same);

and prints the bytes each form takes. Usage::

    python bench/state_storage.py OLD.jsonl NEW.jsonl [--ignore-ids]

``--ignore-ids``: pair the sessions by position and leave their ids out of the comparison (``suite ledger`` names
sessions after the file, so two files of one suite written under two names differ in their ids alone).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from toolwild.core.formats.wtb import load_wtb_suite, session_to_wtb
from toolwild.core.state_change import expected_state_at
from toolwild.core.trajectory import state_digest
from toolwild.envs.registry import session_environment
from toolwild.eval.session import environment_seed

_KEYS = ("expected_states", "expected_state_digests", "expected_state_changes")


def _bytes(path: Path) -> dict[str, int]:
    """Bytes of the file and of each expected-state key (as the writer writes them)."""
    sizes = {"file": path.stat().st_size, **dict.fromkeys(_KEYS, 0)}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            for key in _KEYS:
                if key in record:
                    sizes[key] += len(json.dumps(record[key], ensure_ascii=False).encode())
    return sizes


def check(old_path: Path, new_path: Path, *, ignore_ids: bool = False) -> list[str]:
    """Every difference between the two files other than how they store expected states."""
    old, _ = load_wtb_suite(old_path)
    new, _ = load_wtb_suite(new_path)
    problems: list[str] = []
    if len(old.sessions) != len(new.sessions) or (
        not ignore_ids and [s.id for s in old.sessions] != [s.id for s in new.sessions]
    ):
        return ["the files hold other sessions"]
    tasks = 0
    for before, after in zip(old.sessions, new.sessions, strict=True):
        a, b = session_to_wtb(before), session_to_wtb(after)
        for key in (*_KEYS, "id") if ignore_ids else _KEYS:
            a.pop(key, None)
            b.pop(key, None)
        if a != b:
            problems.append(f"{before.id}: the session differs beyond its expected states")
        episode = session_environment(after, base_dir=new_path.parent).reset(seed=environment_seed(after))
        start = episode.state()
        episode.close()
        for i, (was, now) in enumerate(zip(before.tasks, after.tasks, strict=True)):
            tasks += 1
            if was.expected_state is None or now.expected_state_digest is None:
                problems.append(f"{before.id} task {i}: not one whole state and one digest")
                continue
            if state_digest(was.expected_state) != now.expected_state_digest:
                problems.append(f"{before.id} task {i}: the digest is not that of the whole state")
            rebuilt = expected_state_at(after.tasks, i, start)
            if rebuilt is None or state_digest(rebuilt) != state_digest(was.expected_state):
                problems.append(f"{before.id} task {i}: the changes do not rebuild the whole state")
    print(f"{len(new.sessions)} sessions, {tasks} tasks compared")
    return problems


def main(argv: list[str]) -> int:
    old_path, new_path = Path(argv[1]), Path(argv[2])
    ignore_ids = "--ignore-ids" in argv[3:]
    for name, path in (("old", old_path), ("new", new_path)):
        sizes = _bytes(path)
        print(f"{name}: {sizes['file']:,} bytes; " + ", ".join(f"{k} {sizes[k]:,}" for k in _KEYS if sizes[k]))
    problems = check(old_path, new_path, ignore_ids=ignore_ids)
    for line in problems[:20]:
        print("  ", line)
    print("same sessions, calls, observations and states" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
