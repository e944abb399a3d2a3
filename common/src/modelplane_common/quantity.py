"""Kubernetes resource quantities (``resource.Quantity``), as its CEL quantity library reads them.

Written here rather than taken from the ``kubernetes`` client: its ``parse_quantity`` accepts
spellings the API server rejects and does not round to nano precision, and the client is a
heavy dependency for one function.

Semantics (spec model-deployment §3.4): binary suffixes ``Ki Mi Gi Ti Pi Ei``, decimal suffixes
``n u m k M G T P E``, decimal exponents (``e``/``E``); values are rounded up (away from zero)
to nano precision, so ``141Gi == 144384Mi``; binary-suffixed values saturate at the int64
maximum.
"""

from __future__ import annotations

import decimal
import re

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_CONTEXT = decimal.Context(prec=80, rounding=decimal.ROUND_UP)
_NANO = decimal.Decimal("1e-9")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": decimal.Decimal("1e-9"),
    "u": decimal.Decimal("1e-6"),
    "m": decimal.Decimal("1e-3"),
    "": decimal.Decimal(1),
    "k": decimal.Decimal("1e3"),
    "M": decimal.Decimal("1e6"),
    "G": decimal.Decimal("1e9"),
    "T": decimal.Decimal("1e12"),
    "P": decimal.Decimal("1e15"),
    "E": decimal.Decimal("1e18"),
}
_PATTERN = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE])?)"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


class Quantity:
    """An exact quantity. No ordering operators: DRA CEL has none for quantities (use compareTo)."""

    __slots__ = ("value",)

    def __init__(self, value: decimal.Decimal) -> None:
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -9:
            value = value.quantize(_NANO, context=_CONTEXT)
        self.value = value

    @classmethod
    def parse(cls, text: str) -> Quantity:
        match = _PATTERN.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise QuantityError(f"quantities must match the regular expression: {text!r}")
        number = decimal.Decimal(match["number"])
        if match["binary"]:
            value = _CONTEXT.multiply(number, _BINARY[match["binary"]])
            value = min(max(value, decimal.Decimal(INT64_MIN)), decimal.Decimal(INT64_MAX))
        elif match["exponent"]:
            exponent = int(match["exponent"][1:])
            if abs(exponent) > 60:
                raise QuantityError(f"quantity exponent out of range: {text!r}")
            value = _CONTEXT.scaleb(number, exponent)
        else:
            value = _CONTEXT.multiply(number, _DECIMAL[match["decimal"] or ""])
        return cls(value)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def add(self, other: Quantity | int) -> Quantity:
        return Quantity(_CONTEXT.add(self.value, _as_decimal(other)))

    def sub(self, other: Quantity | int) -> Quantity:
        return Quantity(_CONTEXT.subtract(self.value, _as_decimal(other)))

    def is_integer(self) -> bool:
        return self.value == self.value.to_integral_value() and (
            INT64_MIN <= self.value <= INT64_MAX
        )

    def as_integer(self) -> int:
        if not self.is_integer():
            raise ValueError(f"quantity {self} is not an integer within int64")
        return int(self.value)

    def as_float(self) -> float:
        return float(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            # CEL has no equality between a quantity and any other type: an error, never a match.
            raise TypeError(f"no such overload: quantity == {type(other).__name__}")
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value.normalize()})"

    def __str__(self) -> str:
        return str(self.value.normalize())


def _as_decimal(other: Quantity | int) -> decimal.Decimal:
    if isinstance(other, Quantity):
        return other.value
    if isinstance(other, int) and not isinstance(other, bool):
        return decimal.Decimal(other)
    raise TypeError(f"no such overload: quantity and {type(other).__name__}")
