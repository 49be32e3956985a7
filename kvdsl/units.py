"""Units and dimensions.

Every number is stored in base units: bytes, tokens, elements, seconds, US
dollars and floating-point operations.  A dimension is a vector of exponents
over those six, so `B/s` is (1, 0, 0, -1, 0, 0) and `elements/token` is
(0, -1, 1, 0, 0, 0).

Money has one unit, `USD`.  A price in another currency is written through a
cell holding its exchange rate, so the rate stays visible and editable:
`let EUR = 1.16 USD` then `price_per_hour = 2.10 * EUR / 1 h`.  Hours (`h`)
are 3,600 s; `USD/h`, `tokens/s` and `TFLOP/s` are rates like `GB/s`.

Decimal byte prefixes are powers of 1,000 (a GB is 10^9 bytes) and binary ones
powers of 1,024 (a GiB is 2^30 bytes).  On token counts `K` and `M` are 1,024
and 1,048,576: a "32K context" is 32,768 tokens, as serving engines and the
model cards mean it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from .compact import pickled_by_fields

BASES = ("bytes", "tokens", "elements", "seconds", "USD", "FLOP")
_SINGULAR = {"bytes": "byte", "tokens": "token", "elements": "element", "seconds": "s", "USD": "USD", "FLOP": "FLOP"}


@pickled_by_fields
@dataclass(frozen=True)
class Dim:
    """A physical dimension: exponents of bytes, tokens, elements, seconds, USD, FLOP."""

    exponents: tuple = (0, 0, 0, 0, 0, 0)

    def __post_init__(self):
        if len(self.exponents) < len(BASES):
            object.__setattr__(self, "exponents", tuple(self.exponents) + (0,) * (len(BASES) - len(self.exponents)))

    def __mul__(self, other: "Dim") -> "Dim":
        return Dim(tuple(a + b for a, b in zip(self.exponents, other.exponents)))

    def __truediv__(self, other: "Dim") -> "Dim":
        return Dim(tuple(a - b for a, b in zip(self.exponents, other.exponents)))

    def __pow__(self, n: int) -> "Dim":
        return Dim(tuple(a * n for a in self.exponents))

    @property
    def dimensionless(self) -> bool:
        return not any(self.exponents)

    def unit(self) -> Optional[str]:
        """The base-unit name used in JSON output: `bytes`, `elements/token`, `bytes/s`."""
        if self.dimensionless:
            return None
        num = [_power(BASES[i], e) for i, e in enumerate(self.exponents) if e > 0]
        den = [_power(_SINGULAR[BASES[i]], -e) for i, e in enumerate(self.exponents) if e < 0]
        text = "*".join(num) if num else "1"
        return text + "".join("/" + d for d in den)

    def __str__(self) -> str:
        return self.unit() or "a plain number"


def _power(name: str, e: int) -> str:
    return name if e == 1 else f"{name}^{e}"


NUMBER = Dim()
BYTES = Dim((1, 0, 0, 0))
TOKENS = Dim((0, 1, 0, 0))
ELEMENTS = Dim((0, 0, 1, 0))
SECONDS = Dim((0, 0, 0, 1))
USD = Dim((0, 0, 0, 0, 1, 0))
FLOP = Dim((0, 0, 0, 0, 0, 1))
BOOL = "bool"  # the type of comparisons and flags; not a Dim

_ATOMS: dict[str, tuple[Fraction, Dim]] = {
    "B": (Fraction(1), BYTES),
    "byte": (Fraction(1), BYTES),
    "bytes": (Fraction(1), BYTES),
    "bit": (Fraction(1, 8), BYTES),
    "bits": (Fraction(1, 8), BYTES),
    "token": (Fraction(1), TOKENS),
    "tokens": (Fraction(1), TOKENS),
    "element": (Fraction(1), ELEMENTS),
    "elements": (Fraction(1), ELEMENTS),
    "s": (Fraction(1), SECONDS),
    "second": (Fraction(1), SECONDS),
    "seconds": (Fraction(1), SECONDS),
    "ms": (Fraction(1, 1000), SECONDS),
    "h": (Fraction(3600), SECONDS),
    "hour": (Fraction(3600), SECONDS),
    "hours": (Fraction(3600), SECONDS),
    "USD": (Fraction(1), USD),
    "FLOP": (Fraction(1), FLOP),
}
for _i, _p in enumerate("KMGTP", start=1):
    _ATOMS[f"{_p}B"] = (Fraction(1000) ** _i, BYTES)
    _ATOMS[f"{_p}iB"] = (Fraction(1024) ** _i, BYTES)
    _ATOMS[f"{_p}FLOP"] = (Fraction(1000) ** _i, FLOP)

#: Names a declaration (`window: tokens`) may use for a dimension.
DECLARED_DIMS = {
    "number": NUMBER,
    "bytes": BYTES,
    "tokens": TOKENS,
    "elements": ELEMENTS,
    "seconds": SECONDS,
    "bytes/s": BYTES / SECONDS,
    "bytes/token": BYTES / TOKENS,
    "tokens/s": TOKENS / SECONDS,
    "USD": USD,
    "USD/h": USD / SECONDS,
    "USD/s": USD / SECONDS,
    "FLOP": FLOP,
    "FLOP/s": FLOP / SECONDS,
    "bool": BOOL,
}

#: Suffixes glued to a number: `32K` tokens, `90%`.
SUFFIXES = {"K": (Fraction(1024), TOKENS), "M": (Fraction(1024**2), TOKENS), "%": (Fraction(1, 100), NUMBER)}


def parse_unit(text: str) -> tuple[Fraction, Dim]:
    """`GiB/s` -> (2**30, bytes/s).  Raises KeyError for an unknown unit."""
    num, _, den = text.partition("/")
    factor, dim = _ATOMS[num]
    if den:
        dfactor, ddim = _ATOMS[den]
        factor, dim = factor / dfactor, dim / ddim
    return factor, dim


def unit_names() -> list[str]:
    return sorted(_ATOMS)
