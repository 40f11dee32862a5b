"""Inventory tools: stock levels of a small shop, read and written by typed tools."""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, Field

from toolwild.core.tool import Effect
from toolwild.envs.base import ToolErrorKind
from toolwild.envs.toolkit import ToolFailure, Toolkit, tool

__all__ = ["InventoryEpisode", "InventoryState"]

_ITEMS = ["apple", "banana", "coffee", "flour", "milk", "rice", "sugar", "tea"]


class InventoryState(BaseModel):
    """Stock per item and the order log."""

    stock: dict[str, int] = Field(default_factory=dict)
    orders: list[dict[str, Any]] = Field(default_factory=list)


class InventoryEpisode(Toolkit):
    """One shop, seeded: which items exist and how many are in stock depends on the seed."""

    def __init__(self, *, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.data = InventoryState(stock={item: rng.randint(0, 20) for item in sorted(rng.sample(_ITEMS, 5))})

    def state(self) -> dict[str, Any]:
        """The stock and the order log."""
        return self.data.model_dump()

    @tool(effect=Effect.READ, consumes=("item",), produces=("item",))
    def get_stock(self, item: str) -> dict[str, Any]:
        """How many units of an item are in stock.

        Args:
            item: the item name, e.g. "coffee".
        """
        if item not in self.data.stock:
            raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no item {item!r}")
        return {"item": item, "units": self.data.stock[item]}

    @tool(effect=Effect.READ, produces=("item",))
    def list_items(self) -> list[str]:
        """All items the shop stocks."""
        return sorted(self.data.stock)

    @tool(effect=Effect.WRITE, consumes=("item",), produces=("item",))
    def restock(self, item: str, units: int) -> dict[str, Any]:
        """Add units of an item to the stock.

        Args:
            item: the item name.
            units: how many units arrive (at least 1).
        """
        if units < 1:
            raise ToolFailure(ToolErrorKind.INVALID_ARGUMENTS, "units must be at least 1")
        if item not in self.data.stock:
            raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no item {item!r}")
        self.data.stock[item] += units
        return {"item": item, "units": self.data.stock[item]}

    @tool(effect=Effect.WRITE, consumes=("item",), produces=("order_id",))
    def place_order(self, item: str, units: int) -> dict[str, Any]:
        """Sell units of an item; fails when the stock is too low.

        Args:
            item: the item name.
            units: how many units are sold (at least 1).
        """
        if item not in self.data.stock:
            raise ToolFailure(ToolErrorKind.NOT_FOUND, f"no item {item!r}")
        if units < 1 or units > self.data.stock[item]:
            raise ToolFailure(
                ToolErrorKind.PRECONDITION_FAILED, f"only {self.data.stock[item]} units of {item} in stock"
            )
        self.data.stock[item] -= units
        order = {"order_id": f"ord-{len(self.data.orders) + 1:04d}", "item": item, "units": units}
        self.data.orders.append(order)
        return order
