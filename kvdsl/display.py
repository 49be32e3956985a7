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
    if abs(number) >= 1000:
        decimals = 1
    text = f"{number:,.{decimals}f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"


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
    if dim == SECONDS and 0 < abs(value) < 1:
        return f"{float(value) * 1000:,.4g} ms"
    if dim == SECONDS and abs(value) >= 3600 and value % 3600 == 0:
        return f"{plain_number(value / 3600)} h"
    if dim == USD:
        return f"{float(value):,.2f} USD"
    if dim == USD / SECONDS:
        return f"{float(value) * 3600:,.2f} USD/h"
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


def context_label(tokens: int) -> str:
    """32768 -> '32K', 1048576 -> '1M', 5000 -> '5,000'."""
    if tokens and tokens % (1024 * 1024) == 0:
        return f"{tokens // (1024 * 1024)}M"
    if tokens and tokens % 1024 == 0:
        return f"{tokens // 1024}K"
    return f"{tokens:,}"
