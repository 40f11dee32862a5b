"""The ledger domain with real beancount: the seed ledger, validated writes, duplicates, isolation, canonical form."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from beancount import loader

from toolwild.core.tool import Effect
from toolwild.envs.base import ToolErrorKind, diff_states
from toolwild.envs.domains.ledger import tools as ledger_tools
from toolwild.envs.domains.ledger.canonical import canonical_ledger
from toolwild.envs.domains.ledger.environment import ledger_environment
from toolwild.envs.domains.ledger.seed import ACCOUNTS, generate_ledger, ledger_today
from toolwild.envs.domains.ledger.tools import LedgerEpisode

CARD = "Liabilities:CreditCard"
CHECKING = "Assets:Bank:Checking"
GROCERIES = "Expenses:Food:Groceries"


@pytest.fixture
def episode():
    ep = LedgerEpisode(seed=7)
    yield ep
    ep.close()


def _receipt(ep: LedgerEpisode, **overrides):
    args = {
        "date": ep.today.isoformat(),
        "payee": "Whole Foods",
        "narration": "Groceries",
        "amount": 42.10,
        "expense_account": GROCERIES,
        "payment_account": CARD,
    }
    args.update(overrides)
    return args


def _txn(ep: LedgerEpisode, txn_id: str) -> dict:
    return next(t for t in ep.state()["ledger"] if t["id"] == txn_id)


# ---------------------------------------------------------------------------------------------------- seed
@pytest.mark.parametrize("seed", [0, 1, 2, 41])
def test_seed_ledger_loads_cleanly_and_is_realistic(seed):
    text = generate_ledger(seed)
    entries, errors, options = loader.load_string(text)
    assert errors == []
    assert options["operating_currency"] == ["USD"]
    opened = {e.account for e in entries if type(e).__name__ == "Open"}
    assert set(ACCOUNTS) <= opened
    assert sum(1 for e in entries if type(e).__name__ == "Balance") >= 1
    txns = [e for e in entries if type(e).__name__ == "Transaction"]
    ids = [t.meta["id"] for t in txns]
    assert len(ids) == len(set(ids)) > 100
    assert sorted(ids) == [f"txn-{i:04d}" for i in range(1, len(ids) + 1)]
    payees = {t.payee for t in txns}
    assert {"Whole Foods", "Trader Joe's", "Safeway", "Acme Corp", "Parkside Apartments", "Uber", "Shell"} <= payees
    assert sum(1 for t in txns if t.narration == "Salary") == 8  # twice a month for four months
    assert sum(1 for t in txns if t.narration == "Rent") == 4
    assert any(t.narration == "Credit card payment" for t in txns)
    assert max(t.date for t in txns) <= ledger_today(seed)
    assert all(len(t.postings) == 2 for t in txns if t.payee != "Opening Balance")


def test_seed_ledger_is_deterministic_per_seed():
    assert generate_ledger(3) == generate_ledger(3)
    assert generate_ledger(3) != generate_ledger(4)
    assert generate_ledger(3, months=2) != generate_ledger(3)
    assert loader.load_string(generate_ledger(5, months=2, start=date(2023, 11, 1)))[1] == []


# ---------------------------------------------------------------------------------------------------- writes
def test_add_then_amend_then_recategorize(episode):
    added = episode.call("add_transaction", _receipt(episode))
    assert added.ok, added.error
    txn_id = added.result["id"]
    assert added.result["transaction"]["postings"] == [
        {"account": GROCERIES, "amount": "42.10", "currency": "USD"},
        {"account": CARD, "amount": "-42.10", "currency": "USD"},
    ]
    amended = episode.call("amend_transaction", {"transaction_id": txn_id, "amount": 47.23})
    assert amended.ok and amended.result["changed"] == ["amount"]
    moved = episode.call("recategorize", {"transaction_id": txn_id, "new_account": "Expenses:Food:Restaurants"})
    assert moved.ok and moved.result["old_account"] == GROCERIES
    assert {p["account"]: p["amount"] for p in _txn(episode, txn_id)["postings"]} == {
        "Expenses:Food:Restaurants": "47.23",
        CARD: "-47.23",
    }
    assert [w["tool"] for w in episode.writes] == ["add_transaction", "amend_transaction", "recategorize"]
    assert loader.load_string(episode.text())[1] == []


def test_amend_changes_exactly_one_transaction(episode):
    target = next(t for t in episode.state()["ledger"] if t["payee"] == "Whole Foods")
    before = episode.state()
    obs = episode.call("amend_transaction", {"transaction_id": target["id"], "amount": 12.34})
    assert obs.ok, obs.error
    after = episode.state()
    changes = diff_states(before, after)
    assert changes
    touched = {c["path"].split("/")[2] for c in changes}
    assert len(touched) == 1
    index = int(touched.pop())
    assert before["ledger"][index]["id"] == target["id"]
    assert sorted(c["after"] for c in changes) == ["-12.34", "12.34"]


def test_amend_account_date_and_payee(episode):
    target = next(t for t in episode.state()["ledger"] if t["payee"] == "Shell")
    obs = episode.call(
        "amend_transaction",
        {
            "transaction_id": target["id"],
            "account": "Expenses:Travel",
            "date": episode.today.isoformat(),
            "payee": "Shell Oil",
        },
    )
    assert obs.ok, obs.error
    assert obs.result["changed"] == ["account", "date", "payee"]
    after = _txn(episode, target["id"])
    assert after["payee"] == "Shell Oil" and after["date"] == episode.today.isoformat()
    assert "Expenses:Travel" in {p["account"] for p in after["postings"]}
    text = episode.text()
    assert (
        episode.call("amend_transaction", {"transaction_id": target["id"], "payee": "Shell Oil"}).result["changed"]
        == []
    )
    assert episode.text() == text  # a no-op amend does not rewrite the file
    assert (
        episode.call("amend_transaction", {"transaction_id": target["id"]}).error.kind
        is ToolErrorKind.INVALID_ARGUMENTS
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "needle"),
    [
        ("add_transaction", {"expense_account": "Expenses:Nonexistent"}, "unknown account"),
        ("add_transaction", {"currency": "EUR"}, "Invalid currency EUR"),
        ("add_transaction", {"date": "2024-02-30"}, "not a valid date"),
        ("add_transaction", {"date": "2023-06-01"}, "inactive account"),
        ("add_transaction", {"payment_account": "checking"}, "not a Beancount account name"),
    ],
)
def test_rejected_add_leaves_the_file_byte_identical(episode, tool, arguments, needle):
    before = episode.path.read_bytes()
    obs = episode.call(tool, _receipt(episode, **arguments))
    assert not obs.ok and obs.error.kind is ToolErrorKind.REJECTED
    assert needle.lower() in obs.error.message.lower()
    assert episode.path.read_bytes() == before
    assert episode.writes == []


def test_rejected_amend_and_recategorize_leave_the_file_byte_identical(episode):
    ledger = episode.state()["ledger"]
    recent = next(t for t in reversed(ledger) if t["payee"] in ("Uber", "Safeway", "Whole Foods"))
    before = episode.path.read_bytes()
    for tool, args in [
        ("recategorize", {"transaction_id": recent["id"], "new_account": "Expenses:Groceries:Organic"}),
        ("amend_transaction", {"transaction_id": recent["id"], "account": "Expenses:Nope"}),
        ("amend_transaction", {"transaction_id": recent["id"], "date": "2023-12-31"}),  # before the accounts opened
    ]:
        obs = episode.call(tool, args)
        assert obs.error.kind is ToolErrorKind.REJECTED, (tool, args, obs)
        assert episode.path.read_bytes() == before


def test_failed_balance_assertion_is_rejected(episode):
    # The checking balance is asserted at the start of February; a January salary of another size breaks it.
    salary = next(t for t in episode.state()["ledger"] if t["narration"] == "Salary" and t["date"] < "2024-02-01")
    before = episode.path.read_bytes()
    obs = episode.call("amend_transaction", {"transaction_id": salary["id"], "amount": 10.00})
    assert obs.error.kind is ToolErrorKind.REJECTED
    assert "Balance failed for 'Assets:Bank:Checking'" in obs.error.message
    assert episode.path.read_bytes() == before
    deleted = episode.call("delete_transaction", {"transaction_id": salary["id"]})
    assert deleted.error.kind is ToolErrorKind.REJECTED
    assert episode.path.read_bytes() == before


def test_unbalanced_split_cannot_be_amended_by_amount():
    text = """option "operating_currency" "USD"
2024-01-01 open Assets:Bank:Checking USD
2024-01-01 open Expenses:Food USD
2024-01-01 open Expenses:Shopping USD

2024-01-05 * "Target" "Food and soap"
  id: "txn-0001"
  Expenses:Food       20.00 USD
  Expenses:Shopping    5.00 USD
  Assets:Bank:Checking
"""
    ep = LedgerEpisode(ledger_text=text)
    try:
        obs = ep.call("amend_transaction", {"transaction_id": "txn-0001", "amount": 30})
        assert obs.error.kind is ToolErrorKind.PRECONDITION_FAILED
        assert ep.text() == text
        # the account of the expense side can still be corrected; the elided amount stays elided
        moved = ep.call("recategorize", {"transaction_id": "txn-0001", "new_account": "Expenses:Shopping"})
        assert moved.ok, moved.error
        assert "Assets:Bank:Checking\n" in ep.text()
    finally:
        ep.close()


def test_invalid_starting_ledger_is_refused():
    with pytest.raises(ValueError, match="does not load cleanly"):
        LedgerEpisode(ledger_text='2024-01-01 * "x" "y"\n  Expenses:Nope  1.00 USD\n  Assets:Nope\n')


def test_unknown_id_is_not_found(episode):
    before = episode.path.read_bytes()
    for tool, args in [
        ("amend_transaction", {"transaction_id": "txn-9999", "amount": 1.5}),
        ("delete_transaction", {"transaction_id": "txn-9999"}),
        ("recategorize", {"transaction_id": "nope", "new_account": GROCERIES}),
    ]:
        assert episode.call(tool, args).error.kind is ToolErrorKind.NOT_FOUND
    assert episode.path.read_bytes() == before


def test_repeated_identical_add_is_a_duplicate_and_writes_nothing(episode):
    first = episode.call("add_transaction", _receipt(episode))
    assert first.ok
    text = episode.path.read_bytes()
    again = episode.call("add_transaction", _receipt(episode, payee=" whole foods ", narration="Groceries again"))
    assert again.error.kind is ToolErrorKind.DUPLICATE
    assert first.result["id"] in again.error.message
    assert episode.path.read_bytes() == text
    assert len(episode.writes) == 1
    # once the first one is amended, the same receipt is a different transaction
    episode.call("amend_transaction", {"transaction_id": first.result["id"], "amount": 47.23})
    assert episode.call("add_transaction", _receipt(episode)).ok


def test_deleted_ids_are_never_reused(episode):
    first = episode.call("add_transaction", _receipt(episode)).result["id"]
    assert episode.call("delete_transaction", {"transaction_id": first}).ok
    assert first not in {t["id"] for t in episode.state()["ledger"]}
    second = episode.call("add_transaction", _receipt(episode, amount=3.25)).result["id"]
    assert second != first
    assert loader.load_string(episode.text())[1] == []


def test_amounts_are_exact_decimals(episode):
    obs = episode.call("add_transaction", _receipt(episode, amount=0.1 + 0.2 - 0.3 + 19.99))
    assert obs.ok  # 19.990000000000002 would be three-plus decimals; str() keeps the float's shortest repr
    assert (
        episode.call("add_transaction", _receipt(episode, amount=1.005)).error.kind is ToolErrorKind.INVALID_ARGUMENTS
    )
    assert episode.call("add_transaction", _receipt(episode, amount=0)).error.kind is ToolErrorKind.INVALID_ARGUMENTS
    ok = episode.call("add_transaction", _receipt(episode, amount=42, payee="Safeway"))
    assert ok.ok and ok.result["transaction"]["postings"][0]["amount"] == "42.00"


def test_payee_text_cannot_break_out_of_its_quotes(episode):
    sneaky = 'Joe\'s "Best" \\ Deli'
    obs = episode.call("add_transaction", _receipt(episode, payee=sneaky))
    assert obs.ok, obs.error
    assert _txn(episode, obs.result["id"])["payee"] == sneaky
    before = episode.path.read_bytes()
    bad = episode.call("add_transaction", _receipt(episode, payee='X"\n2024-01-01 open Assets:Evil USD\n'))
    assert bad.error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert episode.path.read_bytes() == before


def test_invalid_argument_types_never_reach_the_tool(episode, monkeypatch):
    def boom(*_args, **_kwargs):
        raise AssertionError("the tool body ran")

    monkeypatch.setattr(ledger_tools, "_money", boom)
    monkeypatch.setattr(ledger_tools, "_date", boom)
    before = episode.path.read_bytes()
    for bad in [
        _receipt(episode, amount="abc"),
        _receipt(episode, amount=[1]),
        _receipt(episode, tags="groceries"),
        _receipt(episode, date=20240418),
        {k: v for k, v in _receipt(episode).items() if k != "amount"},
        {**_receipt(episode), "memo": "extra"},
    ]:
        obs = episode.call("add_transaction", bad)
        assert obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS, bad
    assert episode.call("amend_transaction", {"transaction_id": "txn-0001", "amount": "lots"}).error.kind is (
        ToolErrorKind.INVALID_ARGUMENTS
    )
    assert episode.call("get_balance", {}).error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert episode.call("nope", {}).error.kind is ToolErrorKind.UNKNOWN_TOOL
    assert episode.path.read_bytes() == before and episode.writes == []


@pytest.mark.parametrize(
    ("tool", "field", "base"),
    [
        ("add_transaction", "amount", None),
        ("amend_transaction", "amount", {"transaction_id": "txn-0001"}),
        ("find_transactions", "min_amount", {}),
        ("find_transactions", "max_amount", {}),
    ],
)
@pytest.mark.parametrize("flag", [True, False])
def test_a_boolean_is_never_an_amount(episode, tool, field, base, flag):
    """Finding: `amount: true` booked 1.00 (pydantic's lax float takes a bool). Every number parameter refuses it."""
    args = _receipt(episode) if base is None else dict(base)
    args[field] = flag
    before = episode.path.read_bytes()
    obs = episode.call(tool, args)
    assert obs.error is not None and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS, obs
    assert obs.error.message.startswith(f"{field}: a boolean is not a number")
    assert episode.path.read_bytes() == before and episode.writes == []


def test_amend_refuses_a_negative_amount_instead_of_recording_its_opposite(episode):
    """Finding: amending with `amount: -3` recorded 3.00. The contract says positive (the postings keep their
    signs), so a negative amount is refused and the transaction is untouched."""
    txn_id = episode.call("add_transaction", _receipt(episode)).result["id"]
    before = episode.path.read_bytes()
    obs = episode.call("amend_transaction", {"transaction_id": txn_id, "amount": -3})
    assert obs.error is not None and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert "must be positive" in obs.error.message and "refund" in obs.error.message
    assert episode.path.read_bytes() == before
    assert {p["amount"] for p in _txn(episode, txn_id)["postings"]} == {"42.10", "-42.10"}
    assert [w["tool"] for w in episode.writes] == ["add_transaction"]


def test_amending_a_refund_keeps_it_a_refund(episode):
    """A refund (added with a negative amount, as add_transaction's contract says) amended with a positive amount
    stays a refund: the signs of the postings are kept."""
    refund = episode.call("add_transaction", _receipt(episode, amount=-10, narration="Refund"))
    assert refund.ok, refund.error
    txn_id = refund.result["id"]
    assert episode.call("amend_transaction", {"transaction_id": txn_id, "amount": 3}).ok
    assert {p["account"]: p["amount"] for p in _txn(episode, txn_id)["postings"]} == {GROCERIES: "-3.00", CARD: "3.00"}


def test_search_bounds_must_be_sizes_in_order(episode):
    """A transaction's amount is a size (never negative): a negative bound or min above max would silently match
    everything or nothing, so they are refused like an inverted date range."""
    for args, needle in [
        ({"min_amount": -5}, "min_amount: must not be negative"),
        ({"max_amount": -0.01}, "max_amount: must not be negative"),
        ({"min_amount": 50, "max_amount": 10}, "min_amount is above max_amount"),
    ]:
        obs = episode.call("find_transactions", args)
        assert obs.error is not None and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS, args
        assert needle in obs.error.message
    assert episode.call("find_transactions", {"min_amount": 0, "max_amount": 0}).ok


def test_an_amount_too_large_to_round_is_an_error_not_a_crash(episode):
    obs = episode.call("add_transaction", _receipt(episode, amount=1e300))
    assert obs.error is not None and obs.error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert "too large" in obs.error.message


def test_odd_values_always_come_back_as_observations(episode):
    """Whatever the agent sends, a call answers with an Observation and never raises."""
    odd = [
        "",
        " ",
        "txn-0001",
        "Expenses",
        "2024-02-30",
        "9999-12-31",
        "0001-01-01",
        "é",
        "x" * 300,
        None,
        float("nan"),
        float("inf"),
        -1.0,
        0.001,
        1e20,
        1e300,  # Decimal cannot round it to cents: used to raise InvalidOperation out of the tool
        -5,
        True,
        [],
        {},
        ["a b"],
        ["#ok"],
    ]
    for spec in LedgerEpisode.tool_specs():
        for name in spec.parameters["properties"]:
            for value in odd:
                args = {
                    p: "2024-04-01" if "date" in p else "txn-0001" if p.endswith("_id") else "Expenses:Food:Groceries"
                    for p in spec.required
                }
                args.update({"amount": 5.25} if "amount" in spec.required else {})
                args[name] = value
                obs = episode.call(spec.name, args)
                assert obs.ok or obs.error is not None
    assert loader.load_string(episode.text())[1] == []


# ---------------------------------------------------------------------------------------------------- reads
def test_reads_agree_with_the_ledger(episode):
    ledger = episode.state()["ledger"]

    def total(account_prefix: str, start: str, end: str) -> Decimal:
        return sum(
            (
                Decimal(p["amount"])
                for t in ledger
                if start <= t["date"] <= end
                for p in t["postings"]
                if p["account"].startswith(account_prefix)
            ),
            Decimal(0),
        )

    summary = episode.call(
        "spending_summary", {"start_date": "2024-03-01", "end_date": "2024-03-31", "category": "Expenses:Food"}
    )
    assert summary.ok
    assert Decimal(summary.result["total"]["USD"]) == total("Expenses:Food", "2024-03-01", "2024-03-31")
    assert {r["account"] for r in summary.result["by_account"]} == {GROCERIES, "Expenses:Food:Restaurants"}
    balance = episode.call("get_balance", {"account": CHECKING, "date": "2024-02-15"})
    assert Decimal(balance.result["balances"]["USD"]) == total(CHECKING, "0000", "2024-02-15")
    card = episode.call("get_balance", {"account": "liabilities:creditcard"}).result
    assert card["account"] == CARD and Decimal(card["balances"]["USD"]) == total(CARD, "0000", "9999")
    assert episode.call("get_balance", {"account": "Assets:Crypto"}).error.kind is ToolErrorKind.NOT_FOUND
    assert episode.call("get_balance", {"account": CHECKING, "date": "yesterday"}).error.kind is (
        ToolErrorKind.INVALID_ARGUMENTS
    )
    bad_range = episode.call("spending_summary", {"start_date": "2024-03-31", "end_date": "2024-03-01"})
    assert bad_range.error.kind is ToolErrorKind.INVALID_ARGUMENTS


def test_find_transactions_filters(episode):
    found = episode.call(
        "find_transactions", {"payee": "whole FOODS", "start_date": "2024-03-01", "end_date": "2024-03-31"}
    )
    rows = found.result["transactions"]
    assert found.result["count"] == len(rows) > 0
    assert all(r["payee"] == "Whole Foods" and "2024-03-01" <= r["date"] <= "2024-03-31" for r in rows)
    big = episode.call("find_transactions", {"account": "Expenses:Rent", "min_amount": 1000}).result
    assert big["count"] == 4
    none = episode.call("find_transactions", {"account": "Expenses:Rent", "max_amount": 10}).result
    assert none == {"count": 0, "transactions": [], "truncated": False}
    everything = episode.call("find_transactions", {}).result
    assert everything["truncated"] and len(everything["transactions"]) == ledger_tools.MAX_FOUND


def test_list_accounts(episode):
    expenses = episode.call("list_accounts", {"prefix": "expenses:food"}).result
    assert [a["account"] for a in expenses] == [GROCERIES, "Expenses:Food:Restaurants"]
    assert len(episode.call("list_accounts", {}).result) == len(ACCOUNTS)


def test_run_query(episode):
    obs = episode.call(
        "run_query",
        {
            "bql": "SELECT account, sum(number) AS total WHERE account ~ '^Expenses:Food' "
            "GROUP BY account ORDER BY account"
        },
    )
    assert obs.ok
    assert obs.result["columns"] == ["account", "total"]
    assert [row[0] for row in obs.result["rows"]] == [GROCERIES, "Expenses:Food:Restaurants"]
    assert all(isinstance(row[1], str) for row in obs.result["rows"])
    ids = episode.call("run_query", {"bql": "SELECT DISTINCT entry_meta('id') AS id WHERE payee = 'Acme Corp'"}).result
    assert all(row[0].startswith("txn-") for row in ids["rows"])
    capped = episode.call("run_query", {"bql": "SELECT date, account, position"}).result
    assert capped["truncated"] and len(capped["rows"]) == 200 and capped["row_count"] > 200
    bad_queries = [
        "SELEC x",
        "SELECT nosuchcolumn",
        "SELECT date WHERE date > 'abc'",
        "SELECT account WHERE account ~ '['",  # re.error escapes beanquery
        "SELECT 1 WHERE date > 2024-13-01",  # ValueError escapes beanquery
        "SELECT parse_date('bad')",
        "   ",
    ]
    for bad in bad_queries:
        err = episode.call("run_query", {"bql": bad})
        assert err.error.kind is ToolErrorKind.INVALID_ARGUMENTS, bad
        assert err.error.message


# ---------------------------------------------------------------------------------------------------- episodes
def test_episodes_are_isolated_even_interleaved():
    env = ledger_environment()
    a, b = env.reset(seed=11), env.reset(seed=11)
    try:
        assert a.path != b.path and a.state() == b.state()
        a_id = a.call("add_transaction", _receipt(a)).result["id"]
        b_before = b.state()
        b_id = b.call("add_transaction", _receipt(b, amount=9.99)).result["id"]
        assert a_id == b_id  # each episode numbers its own file
        a.call("amend_transaction", {"transaction_id": a_id, "amount": 47.23})
        assert b.call("delete_transaction", {"transaction_id": b_id}).ok
        assert b.state() == b_before
        assert _txn(a, a_id)["postings"][0]["amount"] == "47.23"
        assert len(a.writes) == 2 and len(b.writes) == 2
    finally:
        a.close()
        assert not a.path.exists() and b.path.exists()
        b.close()
        assert not b.path.parent.exists()


def test_environment_and_tool_specs():
    env = ledger_environment()
    assert env.id == "ledger"
    episode = env.reset(seed=4)
    try:
        assert episode.state() == {"ledger": canonical_ledger(generate_ledger(4))}
        assert episode.today == ledger_today(4)
        assert list(episode.path.parent.iterdir()) == [episode.path]  # no temp files left behind
    finally:
        episode.close()
    specs = {t.name: t for t in env.tools}
    reads = {"run_query", "list_accounts", "find_transactions", "get_balance", "spending_summary"}
    writes = {"add_transaction", "amend_transaction", "delete_transaction", "recategorize"}
    assert set(specs) == reads | writes
    assert {n for n, t in specs.items() if t.effect is Effect.READ} == reads
    assert {n for n, t in specs.items() if t.effect is Effect.WRITE} == writes
    for spec in specs.values():
        assert spec.description and not spec.description.startswith("Args")
        for name, prop in spec.parameters["properties"].items():
            assert prop.get("description"), (spec.name, name)
    add = specs["add_transaction"].parameters
    assert add["required"] == ["date", "payee", "narration", "amount", "expense_account"]
    assert add["properties"]["amount"]["type"] == "number"
    # the default comes from the ledger (issue #17): the schema says so, and the generated ledger's is checking
    payment = add["properties"]["payment_account"]
    assert payment["default"] is None and CHECKING in payment["description"]
    assert "usual payment account" in payment["description"]
    assert specs["get_balance"].required == ["account"]


# ---------------------------------------------------------------------------------------------------- canonical form
def test_canonical_form_ignores_layout():
    header = 'option "operating_currency" "USD"\n2024-01-01 open Assets:Cash USD\n2024-01-01 open Expenses:Food USD\n'
    tidy = header + (
        '\n2024-01-02 * "Cafe" "Coffee" #morning\n  id: "txn-0001"\n'
        "  Expenses:Food   4.50 USD\n  Assets:Cash  -4.50 USD\n"
        '\n2024-01-03 * "Deli" "Lunch"\n  id: "txn-0002"\n  Expenses:Food   12.00 USD\n  Assets:Cash  -12.00 USD\n'
    )
    messy = header + (
        "; reordered, realigned, an elided amount, fewer decimals, a comment\n"
        '2024-01-03 * "Deli" "Lunch"\n  id: "txn-0002"\n  Assets:Cash\n  Expenses:Food                     12 USD\n\n'
        '2024-01-02 * "Cafe" "Coffee" #morning\n  id: "txn-0001"\n  Assets:Cash -4.5 USD\n  Expenses:Food 4.5 USD\n'
    )
    assert canonical_ledger(tidy) == canonical_ledger(messy)
    assert canonical_ledger(tidy)[0]["postings"][0] == {"account": "Assets:Cash", "amount": "-4.50", "currency": "USD"}
    assert canonical_ledger(tidy) != canonical_ledger(tidy.replace("12.00", "12.01").replace("-12.00", "-12.01"))
