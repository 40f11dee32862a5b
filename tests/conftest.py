"""Test-suite setup shared by every directory.

Tests have no ``__init__.py`` files, so shared helpers (fake servers, builders) live in ``tests/helpers`` and are
imported as top-level modules (``from fake_openai import FakeOpenAI``); this puts that directory on ``sys.path``.

Fixture skips fail in CI. About 70 scorer and runner tests read real third-party data from ``../shared/fixtures``
and skip when it is absent, so a clone without it would pass with the scorer barely tested. When ``CI`` or
``TOOLWILD_REQUIRE_FIXTURES`` is set (to anything but ``0``/``false``/``no``), a test skipped for a missing fixture
is reported as a failure instead. A skip counts as a fixture skip when its reason names a fixture or the shared
fixtures folder (the wordings in use: "shared fixtures not present", "fixture not found: PATH", "... fixture not
found at PATH (shared fixtures absent)"); other skips (an optional extra or tool not installed) stay skips.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Generator, Mapping
from pathlib import Path

import pytest

# Every test sees the console CI sees, whatever terminal runs pytest (a developer's may be 57 or 200 wide): rich
# fixes a console's width for good when $COLUMNS is set at the console's making (at import), and otherwise reads it
# at each print. So it is unset before any toolwild module is imported: 80 columns off a terminal, and a test that
# needs another width sets COLUMNS itself.
os.environ.pop("COLUMNS", None)

_HELPERS = str(Path(__file__).resolve().parent / "helpers")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)

REQUIRE_VARIABLES = ("CI", "TOOLWILD_REQUIRE_FIXTURES")
_OFF = {"", "0", "false", "no", "off"}
_FIXTURE_REASON = re.compile(r"fixture|shared[/\\]fixtures", re.IGNORECASE)


def fixtures_required(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a missing-fixture skip must fail: CI runs (``CI=true``) or an explicit request."""
    return any(environ.get(name, "").strip().lower() not in _OFF for name in REQUIRE_VARIABLES)


def is_fixture_skip(reason: str) -> bool:
    """Whether a skip reason says that a shared fixture is missing (see the module docstring)."""
    return bool(_FIXTURE_REASON.search(reason))


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skip report: pytest stores ``(path, line, "Skipped: reason")`` as its long repr."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """Turn a missing-fixture skip into a failure when fixtures are required (skips from marks happen at set-up,
    ``pytest.skip()`` in a test or fixture at call or set-up: every phase is checked)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not fixtures_required():
        return
    reason = _skip_reason(report)
    if is_fixture_skip(reason):
        report.outcome = "failed"
        variables = " or ".join(REQUIRE_VARIABLES)
        report.longrepr = (
            f"{reason}\nA test that needs the shared fixtures (../shared/fixtures beside the project) skipped, and "
            f"{variables} is set: fixture-dependent tests must run here, not skip."
        )


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray instance (2 CPUs, like the CI machine) shared by every Ray test of the run (the CLI reuses it):
    starting and stopping one per module cost several seconds each. A test that shuts it down starts it again."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'toolwild[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def rl_ledger_suite(ledger_suite_64):
    """Eight sessions of the built-in ledger suite for the RL environment's tests: the first seven and the first one
    that opens with a write (``add_transaction`` as its first gold step), which several of those tests need."""
    opens_with_write = next(s for s in ledger_suite_64.sessions if s.tasks[0].gold[0].name == "add_transaction")
    sessions = [s for s in ledger_suite_64.sessions[:7] if s is not opens_with_write] + [opens_with_write]
    return ledger_suite_64.model_copy(update={"sessions": sessions[:8]})


@pytest.fixture(scope="session")
def rl_inventory_suite():
    """What ``toolwild synth sessions --env inventory --n 16`` writes (the RL environment's tests)."""
    import asyncio

    from toolwild.synth.sessions import SessionsConfig, load_handle, synth_sessions

    return asyncio.run(synth_sessions([load_handle("inventory")], SessionsConfig(n_sessions=16))).suite


@pytest.fixture(scope="session")
def ledger_suite_64():
    """``build_ledger_suite(64)``, the built-in suite, built once for the run (read it, do not change it)."""
    from toolwild.synth.providers.ledger import build_ledger_suite

    return build_ledger_suite(64, seed=0)


@pytest.fixture(scope="session")
def ledger_published():
    """The 256-session ``--like-published`` ledger suite, built once for the run (read it, do not change it)."""
    from toolwild.synth.providers.ledger import build_ledger_suite

    return build_ledger_suite(256, seed=0, like_published=True)
