"""BQL (beanquery) over a loaded ledger, with results made JSON-safe for an agent.

beanquery returns beancount objects (Decimal, date, Amount, Position, Inventory, whole directives); an agent sees
JSON, so every value is converted here: numbers as exact decimal strings, dates as ISO strings, inventories as
``{currency: amount}``, directives in the same canonical form as the episode state.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import beanquery
from beancount.core import amount, data, inventory, position

from toolwild.envs.domains.ledger.book import LoadedLedger
from toolwild.envs.domains.ledger.canonical import canonical_transaction, format_number
from toolwild.errors import ToolwildError

__all__ = ["MAX_ROWS", "QueryError", "json_value", "run_bql"]

MAX_ROWS = 200
"""Rows returned at most (the total is reported, so the agent knows it should narrow the query)."""


_QUERY_FAILURES: tuple[type[Exception], ...] = (
    beanquery.Error,
    re.error,
    ValueError,
    TypeError,
    LookupError,
    ArithmeticError,
    AttributeError,
)
"""What evaluating an agent's query can raise. Beyond its own parse/compile errors, beanquery lets Python errors
out of evaluation (``~ '['`` raises ``re.error``, ``2024-13-01`` a ``ValueError``, ``parse_date('bad')`` dateutil's
``ParserError``); a bad query is the agent's mistake and must come back as an answer, not crash the episode."""


class QueryError(ToolwildError, ValueError):
    """A query beanquery could not parse, compile or run (the message is beanquery's)."""


def _inventory(inv: inventory.Inventory) -> Any:
    positions = list(inv)
    if all(p.cost is None for p in positions):
        totals: dict[str, Decimal] = {}
        for p in positions:
            totals[p.units.currency] = totals.get(p.units.currency, Decimal(0)) + p.units.number
        return {cur: format_number(num) for cur, num in sorted(totals.items())}
    return [json_value(p) for p in positions]


def json_value(value: Any) -> Any:
    """A beanquery cell as a JSON-safe value."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return format_number(value) if value.is_finite() else str(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, amount.Amount):
        return f"{format_number(value.number)} {value.currency}" if isinstance(value.number, Decimal) else str(value)
    if isinstance(value, position.Position):
        return position.to_string(value)
    if isinstance(value, inventory.Inventory):
        return _inventory(value)
    if isinstance(value, data.Transaction):
        return canonical_transaction(value)
    if isinstance(value, Mapping):
        return {
            str(k): json_value(v)
            for k, v in value.items()
            if not (isinstance(k, str) and (k.startswith("__") or k in ("filename", "lineno")))
        }
    if isinstance(value, set | frozenset):
        return sorted(json_value(v) for v in value)
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return str(value)


def run_bql(ledger: LoadedLedger, bql: str, *, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """Run one BQL statement; columns, rows (at most ``max_rows``), the total row count and a truncation flag.

    Raises:
        QueryError: the statement is not valid BQL for this ledger.
    """
    if not bql.strip():
        raise QueryError("empty query: give one BQL statement, e.g. SELECT date, payee, position LIMIT 10")
    connection = beanquery.connect("beancount:", entries=ledger.entries, errors=[], options=ledger.options)
    try:
        cursor = connection.execute(bql)
        rows = cursor.fetchall()
        description = cursor.description or []
    except _QUERY_FAILURES as exc:
        where = getattr(getattr(exc, "parseinfo", None), "pos", None)
        detail = f" (at character {where})" if isinstance(where, int) else ""
        raise QueryError(f"{type(exc).__name__}: {exc}{detail}") from None
    columns = [column.name for column in description]
    return {
        "columns": columns,
        "rows": [[json_value(cell) for cell in row] for row in rows[:max_rows]],
        "row_count": len(rows),
        "truncated": len(rows) > max_rows,
    }
