"""Values as people read them: GiB with two decimals, tokens with separators."""

from __future__ import annotations

import math
from fractions import Fraction

from .units import BYTES, SECONDS, USD, Dim

GIB = 1024**3
UNBOUNDED = "unbounded"  # how an infinite answer reads (nothing grows with the unknown)
_BINARY = [(1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")]
_DECIMAL = [(10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")]


def plain_number(value, decimals: int = 4) -> str:
    """1234 -> '1,234'; 9/10 -> '0.9'; 131485957/2560 -> '51,361.7'."""
    if isinstance(value, Fraction) and value.denominator == 1:
        value = value.numerator
    if isinstance(value, int):
        return f"{value:,}"
    number = float(value)
    if 0 < abs(number) < SMALL:
        return significant(number)
    if abs(number) >= 1000:
        decimals = 1
    text = f"{number:,.{decimals}f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"


SMALL = 0.01  # below this a number is shown with significant digits, not decimals that would round it to 0


def significant(number: float, digits: int = 3) -> str:
    """A small number with its significant digits, never a rounded zero: 0.000123, 1.23e-5."""
    text = f"{number:.{digits}g}"
    mantissa, e, exponent = text.partition("e")
    return mantissa + (f"e{int(exponent)}" if e else "")


_SUBSECOND = [(Fraction(1, 1000), "ms"), (Fraction(1, 10**6), "us"), (Fraction(1, 10**9), "ns")]


def _subsecond(value, per: str) -> str:
    """A time under a second in ms, us or ns, with four significant digits: '28.17 ms', '12.29 us/token'."""
    for size, name in _SUBSECOND:
        if abs(value) >= size:
            return f"{float(value / size):,.4g} {name}{per}"
    return f"{significant(float(value))} s{per}"


NOT_APPLICABLE = "n/a"  # how a `none` value reads


def _not_applicable(value) -> bool:
    return type(value).__name__ == "_NotApplicable"


def json_number(value):
    """Exact integers stay integers; other fractions become floats; `none` is null."""
    if _not_applicable(value):
        return None
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else float(value)
    return value


def bytes_text(value) -> str:
    """Bytes with a binary prefix and two decimals: '4.50 GiB', '576 B'."""
    for size, name in _BINARY:
        if abs(value) >= size:
            return f"{float(value) / size:,.2f} {name}"
    return f"{plain_number(value)} B"


def gib_text(value) -> str:
    return f"{float(value) / GIB:,.2f} GiB"


def format_value(value, dim) -> str:
    """A cell value with its unit, for the human-readable output."""
    if value is None:
        return "?"
    if _not_applicable(value):
        return NOT_APPLICABLE
    if isinstance(value, float) and math.isinf(value):
        return UNBOUNDED if value > 0 else "-" + UNBOUNDED
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if not isinstance(dim, Dim) or dim.dimensionless:
        return plain_number(value)
    if dim == BYTES:
        return bytes_text(value)
    bytes_exp, tokens, elements, seconds = dim.exponents[:4]
    if seconds == 1 and 0 < abs(value) < 1 and (dim / SECONDS).exponents in _PER:
        return _subsecond(Fraction(value), _PER.get((dim / SECONDS).exponents, ""))
    if dim == SECONDS and abs(value) >= 3600 and value % 3600 == 0:
        return f"{plain_number(value / 3600)} h"
    if dim == USD:
        return _money(value, 1, "USD")
    if dim == USD / SECONDS:
        return _money(value, 3600, "USD/h")
    if dim == Dim((0, 0, 0, -1, 0, 1)):
        return f"{float(value) / 1e12:,.1f} TFLOP/s"
    if dim == Dim((1, 0, 0, -1)):
        for size, name in _DECIMAL:
            if abs(value) >= size:
                return f"{float(value) / size:,.2f} {name}B/s"
        return f"{plain_number(value)} B/s"
    if bytes_exp == 1 and value >= 1024 and (tokens, elements, seconds) in ((-1, 0, 0), (0, -1, 0)):
        return bytes_text(value) + ("/token" if tokens else "/element")
    unit = dim.unit().replace("bytes", "B").replace("byte", "B")
    return f"{plain_number(value)} {unit}"


# the per-unit times shown like seconds: seconds/token as us/token
_PER = {(0, 0, 0, 0, 0, 0): "", (0, -1, 0, 0, 0, 0): "/token", (0, 0, -1, 0, 0, 0): "/element", (-1, 0, 0, 0, 0, 0): "/byte"}


def _money(value, scale: int, unit: str) -> str:
    """Cents, or the significant digits of an amount smaller than a cent: '2.75 USD/h', '2.1e-6 USD'."""
    amount = float(value) * scale
    return f"{significant(amount)} {unit}" if 0 < abs(amount) < SMALL else f"{amount:,.2f} {unit}"


def context_label(tokens: int) -> str:
    """32768 -> '32K', 1048576 -> '1M', 5000 -> '5,000'."""
    if tokens and tokens % (1024 * 1024) == 0:
        return f"{tokens // (1024 * 1024)}M"
    if tokens and tokens % 1024 == 0:
        return f"{tokens // 1024}K"
    return f"{tokens:,}"
