"""Issue #32, as a new user met it: ``eval``'s options are checked before anything is written, ``--name`` stays inside
``--runs-dir``, an empty suite is refused, and suites made on your own books evaluate (selected, resumed, with their
ledger checks) like any other.

Each item's test failed before its fix (a few cases are guards that passed already: a plain name, options that a
``--suite`` run refused in time): a run folder (or a ledger snapshot) was left by a refused command, a name escaped
``--runs-dir`` with exit 0, an empty suite scored ``n/a`` with exit 0, an own-books selection looked for its ledger
inside the run folder, and the default history skipped the own-books ledger checks without a word.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import random
from pathlib import Path

import pytest
from beancount.scripts import example
from typer.testing import CliRunner

from toolwild.cli.main import app
from toolwild.core.formats.wtb import load_wtb_suite


def run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})


def said(result) -> str:
    """What a command printed (stdout and stderr), whitespace folded: no assertion depends on where lines wrap."""
    return " ".join(result.output.split())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def nothing_written(folder: Path) -> bool:
    return not folder.exists() or not any(folder.iterdir())


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """A year of a fictional person's books from beancount's example generator (``bean-example``), seeded."""
    out = io.StringIO()
    random.seed(11)
    example.write_example_file(dt.date(1980, 5, 12), dt.date(2024, 1, 1), dt.date(2024, 12, 31), True, out)
    path = tmp_path_factory.mktemp("books") / "books.beancount"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def mine(tmp_path_factory, books) -> Path:
    """A 3-session suite on those books, made as the README says (``suite ledger --ledger``)."""
    suite = tmp_path_factory.mktemp("suite") / "mine.jsonl"
    made = run("suite", "ledger", "--ledger", books, "--out", suite, "--sessions", 3)
    assert made.exit_code == 0, made.output
    return suite


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """Two sessions of the built-in ledger suite (expected states and all)."""
    suite = tmp_path_factory.mktemp("small") / "small.jsonl"
    made = run("suite", "ledger", "--out", suite, "--sessions", 2)
    assert made.exit_code == 0, made.output
    return suite


def evaluate(suite: Path | None, runs: Path, *options: object):
    where = ("--suite", suite) if suite is not None else ()
    return run("eval", *where, "--agent", "oracle", "--runs-dir", runs, *options)


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


# ------------------------------------------------------------------------------------------------ --name
@pytest.mark.parametrize("name", ["../escape", "ABSOLUTE", ".", "..", "", "a/b", "a\\b", "tab\there"])
def test_a_run_name_is_one_folder_name_inside_runs_dir(tmp_path, small, name):
    if name == "ABSOLUTE":
        name = str(tmp_path / "abs")
    runs = tmp_path / "runs"
    result = evaluate(small, runs, "--name", name)
    assert result.exit_code == 1, result.output
    assert "--name" in said(result) and "one folder name inside --runs-dir" in said(result)
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing may be written, inside --runs-dir or out"


def test_a_plain_run_name_still_works(tmp_path, small):
    result = evaluate(small, tmp_path / "runs", "--name", "my-run.v2", "--limit", 1)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "my-run.v2" / "metrics.json").is_file()


# ------------------------------------------------------------------------------------------------ bad options
REFUSED = {
    "agent": (["--agent", "orcale"], "unknown agent 'orcale'"),
    "session": (["--sessions", "nope"], "no session nope"),
    "perturb": (["--perturb", "bogus"], "unknown kind 'bogus'"),
    "forked-trials": (["--history", "forked", "--trials", "2"], "--history forked runs one trial"),
    "scripted-missing": (["--agent", "scripted:MISSING"], "missing.json"),
    "model": (["--agent", "model", "--model", "bogus"], "unknown model 'bogus'"),
    "user-wtb": (["--user", "model:local", "--history", "wtb"], "needs the agent's own history"),
}


@pytest.mark.parametrize("builtin", [False, True], ids=["--suite", "built-in suite"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_option_writes_nothing(tmp_path, small, monkeypatch, case, builtin):
    """Each of these used to leave a run folder (the built-in suite's copy, the selection, the perturbation's
    cache, or the config of a run that never started); now nothing is made, not even --runs-dir."""
    options, message = REFUSED[case]
    options = [o.replace("MISSING", str(tmp_path / "missing.json")) for o in options]
    if builtin:  # the built-in ledger suite takes 10 s to make: two of its sessions stand in for it
        two = load_wtb_suite(small)[0]
        monkeypatch.setattr("toolwild.synth.providers.ledger.build_ledger_suite", lambda: two.model_copy(deep=True))
    runs = tmp_path / "runs"
    result = evaluate(None if builtin else small, runs, *options, "--name", "refused")
    assert result.exit_code == 1, result.output
    assert message in said(result) and "Traceback" not in result.output
    assert not runs.exists(), f"a refused command wrote {sorted(str(p) for p in runs.rglob('*'))}"


def test_a_bad_perturb_kind_is_refused_before_any_suite_is_read(tmp_path, small, monkeypatch):
    """``--perturb bogus`` was refused only after the suite was read (15 s for the built-in one)."""

    def must_not_load(*_args, **_kwargs):
        raise AssertionError("the suite was read before --perturb was checked")

    monkeypatch.setattr("toolwild.jobs.evaluate.load_wtb_suite", must_not_load)
    monkeypatch.setattr("toolwild.synth.providers.ledger.build_ledger_suite", must_not_load)
    for suite in (small, None):
        result = evaluate(suite, tmp_path / "runs", "--perturb", "bogus", "--name", "p")
        assert result.exit_code == 1 and "unknown kind 'bogus'" in said(result), (result.output, result.exception)
    paraphrase = evaluate(small, tmp_path / "runs", "--perturb", "paraphrase", "--name", "p")
    assert paraphrase.exit_code == 1 and "--perturb-model" in said(paraphrase)
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------------ empty suite
def test_an_empty_suite_is_refused_like_validate_refuses_it(tmp_path, small):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    result = evaluate(empty, tmp_path / "runs", "--name", "e")
    assert result.exit_code == 1 and "holds no session" in said(result), result.output
    assert run("validate", empty).exit_code == 1  # the two commands agree
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    skipped = evaluate(broken, tmp_path / "runs", "--name", "e", "--skip-invalid")
    assert skipped.exit_code == 1 and "holds no session (every record was skipped)" in said(skipped), skipped.output
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------------ own books
@pytest.mark.parametrize("selection", [("--limit", "1"), ("--sessions", "mine_1")], ids=["limit", "sessions"])
def test_a_selection_of_an_own_books_suite_finds_its_ledger_and_resumes(tmp_path, mine, selection):
    runs = tmp_path / "runs"
    result = evaluate(mine, runs, "--name", "sel", *selection)
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in (runs / "sel" / "suite.jsonl").read_text().splitlines()]
    assert len(kept) == 1 and Path(kept[0]["ledger_file"]).is_absolute()
    assert Path(kept[0]["ledger_file"]) == (mine.parent / "mine.ledger" / "books.beancount").resolve()
    assert metrics(runs / "sel")["total_info"]["task"]["accuracy"] == 1.0

    # killed before its session ended: the resume reads the run's copy, whose ledger is found
    (runs / "sel" / "trajectories.jsonl").write_text("", encoding="utf-8")
    resumed = run("eval", "--resume", runs / "sel")
    assert resumed.exit_code == 0, resumed.output
    assert len((runs / "sel" / "trajectories.jsonl").read_text().splitlines()) == 1
    assert metrics(runs / "sel")["total_info"]["task"]["accuracy"] == 1.0


def test_a_changed_snapshot_is_refused_before_a_run_folder_is_made(tmp_path, books):
    suite = tmp_path / "s" / "mine.jsonl"
    assert run("suite", "ledger", "--ledger", books, "--out", suite, "--sessions", 1).exit_code == 0
    snapshot = suite.parent / "mine.ledger" / "books.beancount"
    snapshot.write_text(snapshot.read_text() + "\n; edited\n", encoding="utf-8")
    stale = evaluate(suite, tmp_path / "runs", "--name", "stale")
    assert stale.exit_code == 1 and "changed since the suite was made" in said(stale), stale.output
    assert not (tmp_path / "runs").exists()


def test_the_default_history_runs_the_state_checks_a_suite_has(tmp_path, mine, small):
    runs = tmp_path / "runs"
    result = evaluate(mine, runs, "--name", "default")
    assert result.exit_code == 0, result.output
    assert json.loads((runs / "default" / "config.json").read_text())["history"] == "free"
    checked = sum(t.checks_state for s in load_wtb_suite(mine)[0].sessions for t in s.tasks)
    assert checked > 0
    state = metrics(runs / "default")["extensions"]["state_info"]
    assert state["task_state"]["total_count"] == checked and state["task_state"]["accuracy"] == 1.0
    assert "state checks not run" not in said(result)

    # asked for explicitly, the published history still runs, and says loudly what it leaves out
    wtb = evaluate(mine, runs, "--name", "wtb", "--history", "wtb")
    assert wtb.exit_code == 0, wtb.output
    assert "state_info" not in metrics(runs / "wtb")["extensions"]
    assert f"warning: state checks not run: {checked} task(s)" in said(wtb) and "--history free" in said(wtb)
    assert "state checks not run" in " ".join(wtb.stderr.split())

    # a suite without expected states (the published format) keeps the published default, without a warning
    published = tmp_path / "published.jsonl"
    records = [json.loads(line) for line in small.read_text().splitlines()]
    for record in records:
        for key in ("expected_states", "expected_state_digests", "expected_state_changes"):
            record.pop(key, None)
    published.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    plain = evaluate(published, runs, "--name", "published")
    assert plain.exit_code == 0, plain.output
    assert json.loads((runs / "published" / "config.json").read_text())["history"] == "wtb"
    assert "state checks not run" not in said(plain)


def test_a_default_history_that_cannot_run_says_how_to_run_without_it(tmp_path, small):
    """A suite with state checks whose environment is missing: the default (free) history needs it; the error says
    so and names the way out, before anything is written."""
    lost = tmp_path / "lost.jsonl"
    records = [json.loads(line) for line in small.read_text().splitlines()]
    for record in records:
        record["environment"] = "gone.env.json"
    lost.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = evaluate(lost, tmp_path / "runs", "--name", "lost")
    assert result.exit_code == 1, result.output
    assert "gone.env.json" in said(result) and "--history wtb" in said(result)
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------------ suite ledger
@pytest.mark.parametrize("options", [("--executor", "bogus"), ("--resume",)], ids=["executor", "nothing-to-resume"])
def test_a_refused_suite_ledger_keeps_no_snapshot(tmp_path, books, options):
    out = tmp_path / "d" / "mine.jsonl"
    result = run("suite", "ledger", "--ledger", books, "--out", out, "--sessions", 1, *options)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "d" / "mine.ledger").exists() and not (tmp_path / "d" / "mine.ledger.new").exists()
    assert nothing_written(tmp_path / "d")


def test_a_refused_rerun_puts_back_the_killed_runs_snapshot(tmp_path, books):
    """A killed run's snapshot is what its --resume needs: a plain rerun on edited books, refused because the run is
    unfinished, used to replace it (and, with nothing to resume, leave a new one behind)."""
    out = tmp_path / "d" / "mine.jsonl"
    assert run("suite", "ledger", "--ledger", books, "--out", out, "--sessions", 2).exit_code == 0
    log = out.with_name(out.name + ".progress.jsonl")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-2]), encoding="utf-8")  # killed after its first session: no end line
    snapshot = tmp_path / "d" / "mine.ledger"
    before = {p.name: sha(p) for p in snapshot.iterdir()}
    edited = tmp_path / "edited.beancount"
    edited.write_text(books.read_text() + "\n; edited\n", encoding="utf-8")

    rerun = run("suite", "ledger", "--ledger", edited, "--out", out, "--sessions", 2)
    assert rerun.exit_code == 1 and "--resume" in said(rerun), rerun.output
    assert {p.name: sha(p) for p in snapshot.iterdir()} == before
    assert not out.with_name("mine.ledger.old").exists()

    resumed = run("suite", "ledger", "--ledger", books, "--out", out, "--sessions", 2, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert len(out.read_text().splitlines()) == 2
