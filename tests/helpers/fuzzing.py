"""Hypothesis profiles for the fuzzing tests: a bounded one for every run, a long one behind ``-m fuzz_long``.

Why one place: the CI budget is shared by every fuzzed loader and the scorer, so the number of cases per test is
set here, not in each test.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

BOUNDED_EXAMPLES = 150
"""Cases per fuzz test in the default run (CI)."""
LONG_EXAMPLES = 5000
"""Cases per fuzz test under ``pytest -m fuzz_long -s`` (prints how many were tried)."""


def fuzz_settings(*, long: bool = False) -> settings:
    """Settings for one fuzz test: no deadline (CI machines vary), derandomized in the bounded run so a red CI is
    reproducible, random in the long run so each run explores new cases."""
    return settings(
        max_examples=LONG_EXAMPLES if long else BOUNDED_EXAMPLES,
        deadline=None,
        derandomize=not long,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        database=None,
    )
