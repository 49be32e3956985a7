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

    def arity_text(self) -> str:
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"

    def sympy_form(self):
        import sympy

        return getattr(sympy, self.sympy)


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
)}
