"""The ``toolwild`` command line: validate, eval (oracle), score, and every command's --help.

Counts are computed from the raw fixture in the test; result files in the published format are built by hand from
the gold DAGs of the raw records.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolwild.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"

needs_sessions = pytest.mark.skipif(
    not SESSIONS.is_file(), reason=f"WildToolBench session fixture not found at {SESSIONS} (shared fixtures absent)"
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PSEUDO = ("ask_user_for_required_parameters", "prepare_to_answer")
EXPECTED_TYPE_COUNTS = {
    "Single-Tool": 11,
    "Clarify": 4,
    "Chat": 2,
    "Parallel Multi-Tool": 2,
    "Mixed Multi-Tool": 1,
}


def run(*args: str | Path):
    """Invoke the CLI on a wide, colourless terminal so tables are not wrapped."""
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})
    result.text = ANSI.sub("", result.output)  # type: ignore[attr-defined]
    return result


def table_rows(text: str) -> list[list[str]]:
    """Cells of every table row in rich output (box-drawing borders split the cells)."""
    rows = []
    for line in text.splitlines():
        if "│" in line or "┃" in line:
            cells = [c.strip() for c in re.split(r"[│┃]", line)]
            rows.append([c for c in cells if c])
    return rows


def assert_clean_failure(result, *fragments: str) -> None:
    assert result.exit_code == 1, result.text
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.text
    for fragment in fragments:
        assert fragment in result.text, result.text


def raw_lines() -> list[str]:
    return [line for line in SESSIONS.read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw_lines()]


# ---------------------------------------------------------------- hand-built published results
def gold_batches(dag: list[dict[str, Any]]) -> list[list[int]]:
    """Every ready node at once (pseudo-actions alone): a legal, optimal path for the fixture's DAGs."""
    done: set[int] = set()
    batches = []
    while len(done) < len(dag):
        ready = [n["idx"] for n in dag if n["idx"] not in done and set(n["dependency_list"]) <= done]
        pseudo = [i for i in ready if dag[i]["action"]["name"] in PSEUDO]
        batch = pseudo[:1] or ready
        batches.append(batch)
        done.update(batch)
    return batches


def published_result(record: dict[str, Any], model: str = "hand-built") -> dict[str, Any]:
    results = []
    for t, dag in enumerate(record["english_answer_list"]):
        log: dict[str, Any] = {"task_idx": t, "begin_of_current_task": {"messages": []}}
        for k, batch in enumerate(gold_batches(dag)):
            nodes = [dag[i] for i in batch]
            if nodes[0]["action"]["name"] in PSEUDO:
                obs = nodes[0]["observation"]
                # any non-empty text is accepted (spec §4); some gold answers in the fixture are empty strings
                out = {"content": obs if isinstance(obs, str) and obs else "ok", "tool_calls": None}
            else:
                calls = [
                    {
                        "id": f"call_{n['idx']}",
                        "type": "function",
                        "function": {"name": n["action"]["name"], "arguments": json.dumps(n["action"]["arguments"])},
                    }
                    for n in nodes
                ]
                out = {"content": None, "tool_calls": calls}
            out["reasoning_content"] = None
            log[f"step_{k}"] = {"inference_input": {"messages": []}, "inference_output": out}
        n_steps = len(log) - 2
        results.append(
            {
                "action_name_label": "correct",
                "is_optimal": True,
                "inference_log": log,
                "latency": [1.0] * n_steps,
                "input_token_count": [10] * n_steps,
                "output_token_count": [1] * n_steps,
            }
        )
    return {"id": record["id"], "model_name": model, "result": results}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def leaf(metrics: dict[str, Any], *keys: str) -> tuple[int, int]:
    node = metrics
    for key in keys:
        node = node[key]
    return node["correct_count"], node["total_count"]


# ---------------------------------------------------------------- validate
@needs_sessions
def test_validate_fixture_reports_counts_and_types():
    records = raw_records()
    types = Counter(t for r in records for t in r["english_task_types"])
    assert dict(types) == EXPECTED_TYPE_COUNTS  # the figures asserted below hold for the raw file
    n_tasks = sum(len(r["english_tasks"]) for r in records)

    result = run("validate", SESSIONS)
    assert result.exit_code == 0, result.text
    rows = table_rows(result.text)
    assert ["sessions", str(len(records))] in rows
    assert ["tasks", str(n_tasks)] in rows
    assert ["malformed records", "0"] in rows
    for name, n in types.items():
        assert [name, str(n)] in rows, f"{name} {n} not in the distribution table"
    assert "suite is valid" in result.text


@needs_sessions
def test_validate_reports_a_malformed_line_and_counts_the_rest(tmp_path):
    lines = raw_lines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:2], "{this is not json", *lines[2:]]) + "\n", encoding="utf-8")

    result = run("validate", bad)
    assert result.exit_code == 1, result.text
    assert "Traceback" not in result.text
    assert "line 3" in result.text
    rows = table_rows(result.text)
    assert ["sessions", "5"] in rows
    assert ["tasks", "20"] in rows
    assert ["malformed records", "1"] in rows
    assert any(r[:2] == ["error", "line 3"] for r in rows), rows


@needs_sessions
def test_validate_names_the_field_of_a_wrong_record(tmp_path):
    records = raw_records()
    records[1]["english_task_types"][2] = "Quadruple-Tool"
    path = write_jsonl(tmp_path / "bad.jsonl", records)

    result = run("validate", path)
    assert result.exit_code == 1, result.text
    assert "line 2" in result.text
    assert "english_task_types[2]" in result.text
    rows = table_rows(result.text)
    assert ["sessions", "4"] in rows
    assert ["tasks", "16"] in rows


@needs_sessions
def test_validate_flags_a_gold_call_to_a_missing_tool(tmp_path):
    records = raw_records()
    records[0]["english_answer_list"][0][0]["action"]["name"] = "getCityForecastV2"
    path = write_jsonl(tmp_path / "bad.jsonl", records)
    result = run("validate", path)
    assert result.exit_code == 1, result.text
    assert "getCityForecastV2" in result.text
    # the problems table wraps its message cell where the path column leaves room: read the words in order
    words = " ".join(re.sub(r"[│┃┆╎|]", " ", result.text).split())
    assert re.search(r"\bnot\b.*\bin the tool list\b", words), result.text


def test_validate_missing_file_fails_cleanly(tmp_path):
    assert_clean_failure(run("validate", tmp_path / "nope.jsonl"), "cannot read")


# ---------------------------------------------------------------- eval
@needs_sessions
@pytest.mark.parametrize("mode", ["wtb", "strict"])
def test_eval_oracle_writes_a_perfect_run(tmp_path, mode):
    args = ["eval", "--suite", SESSIONS, "--agent", "oracle", "--runs-dir", tmp_path, "--name", "t"]
    if mode == "strict":
        args += ["--mode", "strict"]
    result = run(*args)
    assert result.exit_code == 0, result.text

    run_dir = tmp_path / "t"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["agent"] == "oracle"
    assert config["mode"] == mode
    assert config["suite"].endswith("sessions_0_4.reconstructed.jsonl")

    lines = (run_dir / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    assert sorted(json.loads(line)["session_id"] for line in lines) == sorted(r["id"] for r in raw_records())

    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["total_info"]["task"] == {"accuracy": 1.0, "correct_count": 20, "total_count": 20}
    assert metrics["total_info"]["session"] == {"accuracy": 1.0, "correct_count": 5, "total_count": 5}
    assert metrics["extensions"]["mode"] == mode
    assert leaf(metrics, "optimal_info", "Total") == (3, 3)  # 2 parallel + 1 mixed, all on an optimal path
    assert str(run_dir) in result.text.replace("\n", "")


@needs_sessions
def test_eval_unknown_agent_fails_cleanly(tmp_path):
    result = run("eval", "--suite", SESSIONS, "--agent", "gpt-17", "--runs-dir", tmp_path, "--name", "t")
    assert_clean_failure(result, "unknown agent", "gpt-17", "oracle")
    assert not (tmp_path / "t").exists()


def test_eval_missing_suite_fails_cleanly(tmp_path):
    result = run("eval", "--suite", tmp_path / "nope.jsonl", "--runs-dir", tmp_path, "--name", "t")
    assert_clean_failure(result, "cannot read")


# ---------------------------------------------------------------- score
@pytest.fixture
def oracle_run(tmp_path) -> Path:
    result = run("eval", "--suite", SESSIONS, "--agent", "oracle", "--runs-dir", tmp_path, "--name", "t")
    assert result.exit_code == 0, result.text
    return tmp_path / "t"


@needs_sessions
def test_score_reproduces_the_eval_metrics(oracle_run, tmp_path):
    out = tmp_path / "m.json"
    verdicts = tmp_path / "v.jsonl"
    result = run("score", "--suite", SESSIONS, oracle_run / "trajectories.jsonl", "--out", out, "--verdicts", verdicts)
    assert result.exit_code == 0, result.text
    assert json.loads(out.read_text()) == json.loads((oracle_run / "metrics.json").read_text())
    lines = verdicts.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5
    assert all(t["label"] == "correct" for line in lines for t in json.loads(line)["tasks"])


@needs_sessions
def test_score_published_results_with_one_wrong_argument(tmp_path):
    records = raw_records()
    results = [published_result(r) for r in records]
    # session 0, task 0: getCityForecast for Chicago; the model asks for Boston instead
    first_call = results[0]["result"][0]["inference_log"]["step_0"]["inference_output"]["tool_calls"][0]["function"]
    args = json.loads(first_call["arguments"])
    assert args["city"] == "Chicago"
    first_call["arguments"] = json.dumps({**args, "city": "Boston"})
    path = write_jsonl(tmp_path / "published.jsonl", results)
    out = tmp_path / "m.json"

    result = run("score", "--suite", SESSIONS, path, "--out", out)
    assert result.exit_code == 0, result.text
    metrics = json.loads(out.read_text())
    assert metrics["model_name"] == "hand-built"
    assert metrics["total_info"]["task"] == {"accuracy": 19 / 20, "correct_count": 19, "total_count": 20}
    assert metrics["total_info"]["session"] == {"accuracy": 4 / 5, "correct_count": 4, "total_count": 5}
    assert leaf(metrics, "task_type_info", "Single-Tool") == (10, 11)
    assert leaf(metrics, "layer_info", "0") == (4, 5)
    assert leaf(metrics, "turn_subtype_info", "First Turn") == (4, 5)
    assert metrics["extensions"]["error_taxonomy"]["Value"]["count"] == 1


@needs_sessions
def test_score_counts_a_missing_session_as_failed(tmp_path):
    results = [published_result(r) for r in raw_records()[:4]]
    out = tmp_path / "m.json"
    result = run("score", "--suite", SESSIONS, write_jsonl(tmp_path / "p.jsonl", results), "--out", out)
    assert result.exit_code == 0, result.text
    metrics = json.loads(out.read_text())
    assert leaf(metrics, "total_info", "task") == (16, 20)
    assert leaf(metrics, "total_info", "session") == (4, 5)
    assert metrics["extensions"]["error_taxonomy"]["Inference Failed"]["count"] == 4


@needs_sessions
def test_score_unknown_session_id_fails_cleanly(tmp_path):
    results = [published_result(r) for r in raw_records()]
    results[2]["id"] = "wild_tool_bench_99"
    out = tmp_path / "m.json"
    result = run("score", "--suite", SESSIONS, write_jsonl(tmp_path / "p.jsonl", results), "--out", out)
    assert_clean_failure(result, "unknown session", "wild_tool_bench_99")
    assert not out.exists()


@needs_sessions
def test_score_empty_result_file_fails_cleanly(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert_clean_failure(run("score", "--suite", SESSIONS, empty), "no results")


@needs_sessions
def test_score_malformed_result_line_fails_cleanly_with_its_line(tmp_path):
    results = [json.dumps(published_result(r)) for r in raw_records()]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([results[0], "{oops", *results[1:]]) + "\n", encoding="utf-8")
    assert_clean_failure(run("score", "--suite", SESSIONS, path), "line 2")

    out = tmp_path / "m.json"
    result = run("score", "--suite", SESSIONS, path, "--skip-invalid", "--out", out)
    assert result.exit_code == 0, result.text
    assert leaf(json.loads(out.read_text()), "total_info", "task") == (20, 20)


# ---------------------------------------------------------------- help
@pytest.mark.parametrize(
    ("command", "options"),
    [
        ([], ["validate", "score", "eval", "import"]),
        (["validate"], ["--oracle-check", "SUITE.jsonl"]),
        (
            ["score"],
            [
                "--suite",
                "--mode",
                "--out",
                "--verdicts",
                "--model-name",
                "--skip-invalid",
                "--count-provider-errors",
                "--seed",
                "RESULT.jsonl",
            ],
        ),
        (
            ["eval"],
            [
                "--suite",
                "--agent",
                "--mode",
                "--runs-dir",
                "--name",
                "--skip-invalid",
                "--request-timeout",
                "--preflight",
            ],
        ),
        (["import"], ["synthtools"]),
        (["import", "synthtools"], ["--out", "--skip-invalid", "DIR"]),
    ],
    ids=["toolwild", "validate", "score", "eval", "import", "import-synthtools"],
)
def test_help(command, options):
    result = run(*command, "--help")
    assert result.exit_code == 0, result.text
    assert "Usage" in result.text
    for option in options:
        assert option in result.text, f"{option} missing from `toolwild {' '.join(command)} --help`"
