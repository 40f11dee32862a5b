"""Reply bounds (toolwild.llm.json_bounds): soft bounds cut loops, hard bounds make every reply close in budget.

The proof for hard bounds does not trust the module's own count: llama.cpp's converter writes the grammar, the hard
primitive rules go in as the local backend puts them, and a small GBNF reader below computes the longest text that
grammar accepts. It must fit the token budget and use printable ASCII only (one character per byte, so a token,
which llama.cpp never lets be empty under a grammar, always carries at least one of them).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolwild.llm.json_bounds import bound_schema, longest_text
from toolwild.llm.prompt_mode import reply_schema

LEDGER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_transaction",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "date": {"type": "string"},
                    "payee": {"type": "string"},
                    "amount": {"type": "number"},
                    "expense_account": {"type": "string"},
                    "payment_account": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                    "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
                },
                "required": ["date", "payee", "amount", "expense_account"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "find_transactions",
            "parameters": {
                "type": "object",
                "properties": {
                    "payee": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "min_amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                    "limit": {"type": "integer"},
                    "kind": {"type": "string", "enum": ["debit", "credit"]},
                    "since": {"type": "string", "format": "date"},
                },
                "required": [],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "list_accounts", "parameters": {"type": "object", "properties": {}}},
    },
    {
        "type": "function",
        "function": {
            "name": "tag_all",
            "parameters": {
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "meta": {"type": "object"},
                    "note": {"description": "no type at all"},
                    "code": {"type": "string", "pattern": "^[A-Z]+$"},
                },
                "required": ["ids"],
            },
        },
    },
]


class Posting(BaseModel):
    account: str
    amount: float


class Entry(BaseModel):
    payee: str
    postings: list[Posting]
    tags: list[str] = []
    flagged: bool = False


SCHEMAS = {
    "ledger reply (auto)": reply_schema(LEDGER_TOOLS, "auto"),
    "ledger reply (required)": reply_schema(LEDGER_TOOLS, "required"),
    "pydantic with $defs": Entry.model_json_schema(),
    "content only": reply_schema([], "none"),
}


# -- a GBNF reader: the longest text a (bounded) grammar accepts ------------------------------------------------------

_TOKEN = re.compile(r'\s*("(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[A-Za-z0-9-]+|[()|?*+])')


def _parse_rules(gbnf: str) -> dict[str, list[str]]:
    rules = {}
    for line in gbnf.splitlines():
        if "::=" in line:
            name, body = line.split("::=", 1)
            tokens, pos = [], 0
            while pos < len(body.rstrip()):
                match = _TOKEN.match(body, pos)
                assert match, f"cannot read {body[pos:]!r}"
                tokens.append(match.group(1))
                pos = match.end()
            rules[name.strip()] = tokens
    return rules


def _unescape(literal: str) -> str:
    return json.loads(literal) if "\\x" not in literal else literal[1:-1]


class _Longest:
    """Longest accepted text per rule (inf for repetition or recursion); records every character class."""

    def __init__(self, rules: dict[str, list[str]]) -> None:
        self.rules = rules
        self.memo: dict[str, float] = {}
        self.classes: set[str] = set()

    def rule(self, name: str) -> float:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # a 1,000-character bound nests 1,000 groups
        if name not in self.memo:
            self.memo[name] = float("inf")  # recursion reads as unbounded
            self.memo[name] = self._alternates(self.rules[name], 0)[0]
        return self.memo[name]

    def _alternates(self, tokens: list[str], pos: int) -> tuple[float, int]:
        best, pos = self._sequence(tokens, pos)
        while pos < len(tokens) and tokens[pos] == "|":
            length, pos = self._sequence(tokens, pos + 1)
            best = max(best, length)
        return best, pos

    def _sequence(self, tokens: list[str], pos: int) -> tuple[float, int]:
        total = 0.0
        while pos < len(tokens) and tokens[pos] not in ("|", ")"):
            token = tokens[pos]
            if token == "(":
                length, pos = self._alternates(tokens, pos + 1)
                assert tokens[pos] == ")"
            elif token.startswith('"'):
                length = len(_unescape(token))
            elif token.startswith("["):
                self.classes.add(token)
                length = 1
            else:
                length = self.rule(token)
            pos += 1
            if pos < len(tokens) and tokens[pos] in ("*", "+"):
                length = float("inf")
                pos += 1
            elif pos < len(tokens) and tokens[pos] == "?":
                pos += 1
            total += length
        return total, pos


def _hard_grammar(schema: dict[str, Any]) -> str:
    """The grammar the local backend decodes a hard retry under."""
    pytest.importorskip("llama_cpp")
    from toolwild.llm.backends.local import _schema_grammar

    grammar = _schema_grammar(schema, hard=True)
    assert grammar is not None
    return grammar


_PRINTABLE_ASCII_CLASS = re.compile(r"^\[(?:\\x[2-7][0-9A-F](?:-\\x[2-7][0-9A-F])?|[0-9]-[0-9]|[-+eE])+\]$")


@pytest.mark.parametrize("tokens", [256, 96, 1024])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_longest_hard_reply_fits_the_budget(name: str, tokens: int) -> None:
    bounded = bound_schema(SCHEMAS[name], tokens=tokens, bounds="hard")
    assert bounded is not None
    reader = _Longest(_parse_rules(_hard_grammar(bounded)))
    longest = reader.rule("root")
    assert longest == longest_text(bounded) <= tokens
    assert all(_PRINTABLE_ASCII_CLASS.match(cls) for cls in reader.classes), reader.classes


def test_the_unbounded_schema_has_no_longest_reply() -> None:
    """The reader can fail: the converter's own grammar for the same schema is unbounded."""
    pytest.importorskip("llama_cpp")
    from llama_cpp import llama_grammar

    schema = reply_schema(LEDGER_TOOLS[:3], "auto")  # the converter itself rejects tag_all's typeless "note"
    assert longest_text(schema) is None
    reader = _Longest(_parse_rules(llama_grammar.json_schema_to_gbnf(json.dumps(schema))))
    assert reader.rule("root") == float("inf")


def test_hard_bounds_keep_required_values_roomy_before_optional_ones() -> None:
    bounded = bound_schema(SCHEMAS["ledger reply (required)"], tokens=256, bounds="hard")
    assert bounded is not None
    calls = bounded["properties"]["tool_calls"]
    assert calls["maxItems"] == 1  # one call where the budget has room for one
    add = next(a for a in calls["items"]["anyOf"] if a["properties"]["name"]["enum"] == ["add_transaction"])
    args = add["properties"]["arguments"]
    assert set(args["required"]) == {"date", "payee", "amount", "expense_account"} <= set(args["properties"])
    assert args["properties"]["payee"]["maxLength"] >= 24
    assert args["additionalProperties"] is False


def test_hard_bounds_drop_tools_that_cannot_fit_and_give_up_when_nothing_does() -> None:
    tight = bound_schema(SCHEMAS["ledger reply (required)"], tokens=70, bounds="hard")
    assert tight is not None
    names = [a["properties"]["name"]["enum"][0] for a in tight["properties"]["tool_calls"]["items"]["anyOf"]]
    assert "list_accounts" in names and "add_transaction" not in names
    assert bound_schema(SCHEMAS["ledger reply (required)"], tokens=20, bounds="hard") is None


def test_soft_bounds_cut_loops_without_squeezing_values() -> None:
    soft = bound_schema(SCHEMAS["ledger reply (auto)"], tokens=256, bounds="soft")
    assert soft is not None
    calls = soft["anyOf"][0]["properties"]["tool_calls"]
    assert 2 <= calls["maxItems"] < 8  # the calls that fit 256 tokens comfortably, not a looping eighth
    add = calls["items"]["anyOf"][0]["properties"]["arguments"]["properties"]
    tags = add["tags"]["anyOf"][0]
    assert tags["maxItems"] >= 2 and tags["items"]["maxLength"] >= 64
    assert 64 <= add["payee"]["maxLength"] <= 500
    assert add["amount"] == {"type": "number"}  # bounded already: left as it was
    content = soft["anyOf"][1]["properties"]["content"]
    assert content["maxLength"] == 500  # an answer keeps room (up to the cap llama.cpp's grammar parser allows)
    roomy = bound_schema(SCHEMAS["ledger reply (auto)"], tokens=4096, bounds="soft")
    assert roomy is not None and roomy["anyOf"][0]["properties"]["tool_calls"]["maxItems"] == 8


def test_existing_bounds_are_kept_when_tighter() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 5}}, "required": ["code"]}
    for bounds in ("soft", "hard"):
        bounded = bound_schema(schema, tokens=256, bounds=bounds)  # type: ignore[arg-type]
        assert bounded is not None and bounded["properties"]["code"]["maxLength"] == 5


def test_recursive_schemas_are_not_bounded() -> None:
    tree = {
        "$defs": {
            "Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
        },
        "$ref": "#/$defs/Node",
    }
    assert bound_schema(tree, tokens=256, bounds="soft") is None
    assert bound_schema(tree, tokens=256, bounds="hard") is None


def test_published_tool_schemas_all_bound(tmp_path: Path) -> None:
    """Every tool list of the published WildToolBench sample gives a hard grammar that fits 256 tokens."""
    path = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "wildtoolbench" / "tools_en.jsonl"
    if not path.is_file():
        pytest.skip(f"fixture not found: {path}")
    for line in path.read_text().splitlines()[:40]:
        tools = json.loads(line)
        tools = tools if isinstance(tools, list) else tools.get("tools", [])
        schema = reply_schema([t for t in tools if isinstance(t, dict)], "auto")
        bounded = bound_schema(schema, tokens=256, bounds="hard")
        assert bounded is not None
        assert _Longest(_parse_rules(_hard_grammar(bounded))).rule("root") <= 256
