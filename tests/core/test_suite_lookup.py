"""``Suite.session`` answers from an index, and stays right when the sessions change after a lookup."""

from __future__ import annotations

from toolwild.core.session import Session, Suite


def _s(sid: str) -> Session:
    return Session(id=sid, env_info="", tools=[], tasks=[])


def test_lookups_follow_changes_to_the_sessions():
    suite = Suite(name="x", sessions=[_s("a"), _s("b")])
    assert suite.session("b").id == "b" and suite.session("z") is None
    suite.sessions.append(_s("c"))
    assert suite.session("c") is suite.sessions[2]
    suite.sessions[0] = _s("q")
    assert suite.session("a") is None and suite.session("q") is suite.sessions[0]
    suite.sessions.pop(0)
    assert suite.session("b") is suite.sessions[0] and suite.session("c") is suite.sessions[1]


def test_the_first_of_two_sessions_with_one_id_is_found_as_before():
    first, second = _s("a"), _s("a")
    assert Suite(name="x", sessions=[first, second]).session("a") is first
