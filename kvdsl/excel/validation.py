"""Data validation for typed cells, read from the `require` rules of their block.

A requirement is split at `and`; each part that compares the cell with a
number (`gpus >= 1`, `utilization <= 1`) gives a bound, and
`whole(x)` makes it a whole number.  Parts that join two cells
(`kv_heads <= heads`) or use `or` give no bound: Excel checks one cell.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from .. import model as m
from ..program import CellRef
from ..units import BYTES, FLOP, SECONDS, TOKENS, USD, Dim

GIB = 1024**3
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class Bounds:
    """What a typed number must be: whole or not, and its limits (base units)."""

    whole: bool = False
    low: Optional[Fraction] = None
    low_strict: bool = False
    high: Optional[Fraction] = None
    high_strict: bool = False

    @property
    def fraction(self) -> bool:
        """A share between 0 and 1: typed and shown as a percentage."""
        return not self.whole and self.high == 1 and self.low is not None and self.low >= 0


def bounds(program, key) -> Optional[Bounds]:
    """The bounds the requirements of `key`'s block put on `key`, or None if none do."""
    block, cell = key
    by_block = _BOUNDS.setdefault(program, {})
    if block not in by_block:
        by_block[block] = _block_bounds(program, block)
    return by_block[block].get(cell)


_BOUNDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # program -> block -> cell -> Bounds


def _block_bounds(program, block: str) -> dict:
    """Every cell of `block` that its requirements bound, read in one pass over them."""
    found: dict = {}
    for name in program.blocks[block].requirements:
        rc = program.cells.get((block, name))
        if rc is None or rc.expr is None:
            continue
        for part in m.conjuncts(rc.expr):
            for ref in _refs(part):
                if ref.key[0] == block and not ref.via:
                    rule = found.setdefault(ref.key[1], Bounds())
                    if not _apply(part, ref.key, rule) and rule == Bounds():
                        del found[ref.key[1]]
    return found


def _refs(part) -> list:
    """The cells a condition could bound: a side of a comparison that is a cell, or the cell `whole` tests."""
    whole = _whole_of(part)
    if whole is not None:
        return [whole]
    if not isinstance(part, m.Binary):
        return []
    sides = [part.left, part.right]
    if isinstance(part.left, m.Call) and len(part.left.args) == 1:
        sides.append(part.left.args[0])
    return list({side.key: side for side in sides if isinstance(side, CellRef)}.values())




def _is(node, key) -> bool:
    return isinstance(node, CellRef) and node.key == key and not node.via


def _whole_of(part):
    """The cell that `whole(cell)` (or `floor(cell) == cell`, as a spec may spell it) tests, or None."""
    if isinstance(part, m.Call) and part.func == "whole" and len(part.args) == 1 and isinstance(part.args[0], CellRef):
        return part.args[0]
    if (isinstance(part, m.Binary) and part.op == "==" and isinstance(part.left, m.Call) and part.left.func == "floor"
            and len(part.left.args) == 1 and isinstance(part.right, CellRef) and _is(part.left.args[0], part.right.key)):
        return part.right
    return None


def _apply(part, key, found: Bounds) -> bool:
    whole = _whole_of(part)
    if whole is not None:
        found.whole = found.whole or _is(whole, key)
        return _is(whole, key)
    if not isinstance(part, m.Binary):
        return False
    left, right, op = part.left, part.right, part.op
    if op not in _FLIP:
        return False
    if isinstance(left, m.Num) and _is(right, key):
        left, right, op = right, left, _FLIP[op]
    if not (_is(left, key) and isinstance(right, m.Num)):
        return False
    value = Fraction(right.value)
    if op in (">", ">="):
        if found.low is None or value >= found.low:
            found.low, found.low_strict = value, op == ">"
    else:
        if found.high is None or value <= found.high:
            found.high, found.high_strict = value, op == "<"
    return True


@dataclass
class HumanUnit:
    """How a typed cell is shown: the base value divided by `factor`, with a number format."""

    factor: Fraction  # base units per human unit: 1073741824 for GiB, 1/3600 for USD/h
    number_format: str
    unit: str

    def to_base(self) -> str:
        """The formula text that turns a human value into base units: `*1073741824`, `/3600`."""
        return _scale(self.factor)

    def from_base(self) -> str:
        """The formula text that turns a base value into this unit: `/1073741824`, `*3600`."""
        return _scale(1 / Fraction(self.factor))


def _scale(factor) -> str:
    factor = Fraction(factor)
    if factor == 1:
        return ""
    if factor.denominator == 1:
        return f"*{factor.numerator}"
    if factor.numerator == 1:
        return f"/{factor.denominator}"
    return f"*{factor.numerator}/{factor.denominator}"


def human_unit(dim, rule: Optional[Bounds], values=()) -> HumanUnit:
    """GiB for memory, % for shares, thousands separators for counts; a time in the unit that writes
    `values` (the values it will show) with the fewest digits: hours, seconds or milliseconds."""
    if dim == BYTES:
        return HumanUnit(GIB, '#,##0.00" GiB"', "GiB")
    if rule is not None and rule.fraction:
        return HumanUnit(1, "0%", "%")
    if dim == SECONDS:
        return time_unit(values)
    if dim == TOKENS:
        return HumanUnit(1, '#,##0" tokens"', "tokens")
    if isinstance(dim, Dim) and dim.dimensionless and rule is not None and rule.whole:
        return HumanUnit(1, "#,##0", "")
    value = next((v for v in values if v is not None), None)
    return HumanUnit(1, number_format(dim, value, fractional=True) if isinstance(dim, Dim) else "General",
                     dim.unit() if isinstance(dim, Dim) and dim.unit() else "")


def time_unit(values=()) -> HumanUnit:
    """Hours when every value is a whole number of them, milliseconds when every value is below a second,
    else seconds (zeros count for any)."""
    times = [Fraction(v) for v in values if v is not None and not isinstance(v, (bool, str)) and v != 0]
    if times and all(t >= 3600 and t % 3600 == 0 for t in times):
        return HumanUnit(Fraction(3600), '#,##0" h"', "h")
    if times and all(abs(t) < 1 for t in times):
        return HumanUnit(Fraction(1, 1000), '#,##0.0" ms"', "ms")
    return HumanUnit(1, '#,##0.00" s"', "s")


def number_format(dim, value=None, fractional: bool = False) -> str:
    """The number format of a value of dimension `dim`: separators, the unit after the number, and decimals
    enough for three significant digits of `value` (none for a whole number, unless the cell's value may
    stop being whole: `fractional`)."""
    if dim == USD:
        return '"$"#,##0.00'
    if dim == USD / SECONDS:
        return '"$"0.000000" /s"'
    if dim == SECONDS:
        return '#,##0.000" s"'
    if not isinstance(dim, Dim):
        return "General"
    digits = _digits(value, fractional)
    unit = {BYTES: "B", TOKENS: "tokens", BYTES / SECONDS: "B/s"}.get(dim, "" if dim.dimensionless else dim.unit())
    return digits + (f'" {unit}"' if unit else "")


def _digits(value, fractional: bool = False) -> str:
    """`#,##0` with the decimals that show three significant digits of `value` (at most six)."""
    import math

    if value is None or isinstance(value, (bool, str)) or value == 0 or (value == int(value) and not fractional):
        return "#,##0"
    places = min(6, max(0, 2 - math.floor(math.log10(abs(float(value))))))
    return "#,##0" + ("." + "0" * places if places else "")


# how a block sheet shows a figure in base units beside the one typed or read in these
SHEET_UNITS = {
    BYTES: HumanUnit(GIB, '#,##0.00" GiB"', "GiB"),
    BYTES / SECONDS: HumanUnit(10**9, '#,##0" GB/s"', "GB/s"),
    FLOP / SECONDS: HumanUnit(10**12, '#,##0.0" TFLOP/s"', "TFLOP/s"),
    USD / SECONDS: HumanUnit(Fraction(1, 3600), '"$"#,##0.00" /h"', "USD/h"),
}


def sheet_unit(dim) -> Optional[HumanUnit]:
    """The unit a block sheet shows `dim` in (GiB, GB/s, TFLOP/s, USD/h), or None to keep base units."""
    return SHEET_UNITS.get(dim) if isinstance(dim, Dim) else None


ANY_NUMBER = Fraction(10**300)


def yes_no_validation(what: str):
    """A drop-down of TRUE and FALSE for a typed condition."""
    from openpyxl.worksheet.datavalidation import DataValidation

    return DataValidation(type="list", formula1='"TRUE,FALSE"', allow_blank=False, showErrorMessage=True,
                          showInputMessage=True, errorTitle="Not a valid value", error=f"{what}: TRUE or FALSE."[:255],
                          promptTitle=what[:32], prompt="TRUE or FALSE")


def data_validation(rule: Bounds, unit: HumanUnit, what: str, example):
    """An openpyxl DataValidation for a typed number in `unit` (bounds converted from base units)."""
    from openpyxl.worksheet.datavalidation import DataValidation

    kind = "whole" if rule.whole and unit.factor == 1 else "decimal"
    low = None if rule.low is None else rule.low / unit.factor
    high = None if rule.high is None else rule.high / unit.factor
    if rule.fraction and rule.low_strict:
        low = Fraction(1, 100)  # a share above 0: at least 1%
    elif rule.low_strict and low is not None:
        low = low + (1 if kind == "whole" else Fraction(1, 10**6))
    if low is not None and high is not None:
        operator, f1, f2 = "between", low, high
    elif low is not None:
        operator, f1, f2 = "greaterThanOrEqual", low, None
    elif high is not None:
        operator, f1, f2 = "lessThanOrEqual", high, None
    else:  # no bound: still a number, so `128K` or `90%` typed as text is refused
        operator, f1, f2 = "between", -ANY_NUMBER, ANY_NUMBER
    text = describe_rule(rule, unit, low, high)
    prompt = f"{text}. Example: {example}"
    dv = DataValidation(type=kind, operator=operator, formula1=_num(f1), formula2=None if f2 is None else _num(f2),
                        allow_blank=False, showErrorMessage=True, showInputMessage=True,
                        errorTitle="Not a valid value"[:32], error=f"{what}: {text}."[:255],
                        promptTitle=what[:32], prompt=prompt[:255])
    return dv


def describe_rule(rule: Bounds, unit: HumanUnit, low, high) -> str:
    """`a whole number of tokens, at least 1` and the like."""
    noun = {"%": "a percentage", "tokens": "tokens"}.get(unit.unit, "a number")
    if unit in SHEET_UNITS.values():
        noun = unit.unit
    head = ("a whole number" if rule.whole else "a number") + ("" if noun == "a number" else f" ({noun})")
    if unit.unit == "%":
        head = "a percentage"
    parts = []
    show = (lambda v: f"{float(v) * 100:g}%") if unit.unit == "%" else (lambda v: f"{float(v):,g}")
    if low is not None:
        parts.append(f"at least {show(low)}")
    if high is not None:
        parts.append(f"at most {show(high)}")
    return head + (", " + " and ".join(parts) if parts else "")


def _num(value) -> str:
    value = Fraction(value)
    if abs(value) >= ANY_NUMBER:
        return "-1E+300" if value < 0 else "1E+300"
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


def example_text(value, unit: HumanUnit) -> str:
    """The current value as a reader types it, with the 128K hint for tokens."""
    if value is None or isinstance(value, bool):
        return ""
    number = Fraction(value) / unit.factor
    if unit.unit == "%":
        return f"{float(number) * 100:g}% (type 90%, not 90)"
    if unit.unit == "tokens":
        return f"{int(number)} (131072 for 128K)"
    return f"{float(number):g}"
