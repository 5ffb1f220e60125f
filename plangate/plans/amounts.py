"""The amount a money call moves, from the argument its tool names (``ToolInfo.amount``), in the
unit the tool declares (``ToolInfo.amount_unit``): ``units``, whole currency units with a
fraction (``amount_eur: 7.25``), or ``cents``, the smallest unit (``amount_cents: 725``). Both
come out in whole units: the effect ledger records that, and the policies see it times 100 as
``context.amount_cents`` (725 for either), so a tool whose argument is in cents is never seen 100
times over."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Literal, Protocol

AmountUnit = Literal["units", "cents"]
AMOUNT_UNITS: tuple[AmountUnit, ...] = ("units", "cents")


class Moves(Protocol):
    @property
    def amount(self) -> str | None: ...

    @property
    def amount_unit(self) -> AmountUnit: ...


def moved(info: Moves, args: Mapping[str, object], *, strings: bool = True) -> Decimal | None:
    """The amount in whole currency units; None where the tool names no amount argument or the
    call's is not a finite number (a string of one counts only with ``strings``)."""
    value = args.get(info.amount) if info.amount else None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, str) and not strings:
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    if not amount.is_finite():
        return None
    return amount.scaleb(-2) if info.amount_unit == "cents" else amount  # 1200 -> 12.00
