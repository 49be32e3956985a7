"""The functions a kvspec expression may call, each defined once: its arity,
its exact value, its SymPy form and its Excel form.  The resolver checks calls
against this table, the evaluator computes with it, the symbolic layer and the
Excel printers translate with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional


@dataclass(frozen=True)
class Function:
    """One built-in function.

    `sympy` names the SymPy callable (looked up when first used, so that
    evaluating never imports SymPy); `excel` turns the printed arguments into
    Excel formula text, and `excel_negative` says that text starts with a
    unary minus (Excel binds it tighter than `^`).
    """

    name: str
    min_args: int
    max_args: Optional[int]
    exact: Callable
    sympy: str
    excel: Callable
    excel_negative: bool = False
    text: bool = False  # its value is text (its arguments are numbers)

    def arity_text(self) -> str:
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"

    def sympy_form(self):
        import sympy

        return getattr(sympy, self.sympy)


def _fixed(args) -> str:
    """`x` rounded to `digits` decimals (halves away from zero), with thousands separators: Excel's FIXED."""
    x, digits = Fraction(args[0]), args[1]
    if Fraction(digits).denominator != 1 or not 0 <= digits <= 15:
        raise ValueError(f"fixed() takes a whole number of decimals from 0 to 15, not {float(digits):g}")
    scale = 10 ** int(digits)
    units = math.floor(abs(x) * scale + Fraction(1, 2))
    whole, part = divmod(units, scale)
    text = f"{whole:,}" + (f".{part:0{int(digits)}d}" if digits else "")
    return "-" + text if x < 0 and units else text


def _call(name: str) -> Callable:
    return lambda args: f"{name}({', '.join(args)})"


FUNCTIONS = {f.name: f for f in (
    Function("min", 1, None, lambda args: min(args), "Min", _call("MIN")),
    Function("max", 1, None, lambda args: max(args), "Max", _call("MAX")),
    # INT rounds toward minus infinity, like floor
    Function("floor", 1, 1, lambda args: Fraction(math.floor(args[0])), "floor", _call("INT")),
    # -INT(-x) is ceiling(x) for every sign; Excel's CEILING has sign quirks
    Function("ceil", 1, 1, lambda args: Fraction(math.ceil(args[0])), "ceiling", lambda args: f"-INT(-({args[0]}))",
             excel_negative=True),
    Function("abs", 1, 1, lambda args: abs(args[0]), "Abs", _call("ABS")),
    # text of a number for a sentence: fixed(tpot_seconds / 1 ms, 1) is "41.2"
    Function("fixed", 2, 2, _fixed, "", _call("FIXED"), text=True),
)}
