"""Amounts as text: the one way the ledger domain prints a number (exact, at least two decimals)."""

from __future__ import annotations

from decimal import Decimal

__all__ = ["format_number"]

_CENT = Decimal("0.01")


def format_number(number: Decimal) -> str:
    """A decimal as a string with (at least) two decimals: ``42.1`` -> ``"42.10"``, ``-3`` -> ``"-3.00"``."""
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -2:
        return f"{number.quantize(_CENT):f}"
    return f"{number.normalize():f}"
