"""The built-in functions a kvspec expression may call, each defined once.

A `Function` states its arity, its exact value, its SymPy form, its NumPy
form, its Excel form and its dimension rule.  Every back end reads this table
and nothing else: the resolver checks calls against it (`kvdsl/dims.py`), the
evaluator computes with `exact`, `sweep` with `numpy`, the symbolic layer with
`sympy`, both Excel printers with `excel`.  `tests/test_functions.py` checks
that every back end covers every function, and that a function added here
alone works in `eval`, `sweep`, `solve` and the workbook.

Functions a spec defines itself (`fn name(a) = ...`) are not here: the first
pass inlines them (`kvdsl/expand.py`).  These are the language's own.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional

from .units import BOOL

CALL, NEGATIVE, COMPARISON = "call", "negative", "comparison"  # how an Excel form's text binds


class MixedDimensions(Exception):
    """A dimension rule's refusal: the arguments have these different dimensions."""

    def __init__(self, dims: list):
        super().__init__("mixed dimensions")
        self.dims = dims


def same_dimension(dims: list):
    """The rule of `min`, `max`, `floor`, ...: arguments of one dimension, and a result of it.

    `dims` holds each argument's dimension, None for a bare 0 (which has any);
    the result is None when every argument is a bare 0.
    """
    real = [d for d in dims if d is not None]
    if any(d != real[0] for d in real):
        raise MixedDimensions(real)
    return real[0] if real else None


def text_of_numbers(dims: list):
    """The rule of `fixed`: numbers of any dimension in, text out."""
    return "text"  # names.TEXT


def plain_number(dims: list):
    """The rule of `ln`: a plain number (no unit) in, a plain number out."""
    from .units import NUMBER

    real = [d for d in dims if d is not None]
    if any(d != NUMBER for d in real):
        raise MixedDimensions([NUMBER] + [d for d in real if d != NUMBER])
    return NUMBER


def condition(dims: list):
    """The rule of a test of numbers (`whole`): arguments of one dimension, a condition as result."""
    same_dimension(dims)
    return BOOL


@dataclass(frozen=True)
class Function:
    """One built-in function.

    `exact` takes the arguments' values (Fractions) and gives the value;
    `sympy` and `numpy` take SymPy expressions and NumPy arrays of floats and
    give the same in those worlds (they import their library when called, so
    evaluating never imports it); `excel` takes the arguments' Excel texts,
    each whole (no operator outside parentheses binds tighter than a call's
    comma), and gives the Excel text, which binds as `excel_binds` says:
    like a call, like text that starts with a minus, or like a comparison.
    `dims` is the dimension rule (see `same_dimension`).  `sympy_head` is
    the SymPy function `sympy` builds, when there is one, so a printer that
    meets it in a SymPy expression can write the call back.  `bounds` takes
    each argument's bounds over a range of values, (low, high, whole) with
    `whole` true when every value is an integer, and gives the same of the
    result, a condition it decides there, or None when it cannot bound it
    (`kvdsl/intervals.py`: the answer search then evaluates point by point).
    """

    name: str
    min_args: int
    max_args: Optional[int]
    exact: Callable
    sympy: Callable
    numpy: Callable
    excel: Callable
    dims: Callable = same_dimension
    excel_binds: str = CALL
    sympy_head: Optional[str] = None
    summary: str = ""
    text: bool = False  # its value is text: no symbolic form, and a sweep reports no number for it
    bounds: Optional[Callable] = None

    @property
    def variadic(self) -> bool:
        """True when any number of arguments (from `min_args`) is accepted: a `for` may supply them."""
        return self.max_args is None

    def arity_text(self) -> str:
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"

    def accepts(self, count: int) -> bool:
        return count >= self.min_args and (self.max_args is None or count <= self.max_args)


def _sympy():
    import sympy

    return sympy


def _numpy():
    import numpy

    return numpy


SNAP = 8 * 2.0**-52  # relative distance under which a float is taken for the integer next to it


def snapped(x):
    """Floats that stand for exact values, with those within a few ULPs of an integer moved onto it.

    hazard: `floor(0.3 / 0.1 * 10)` is 29 in floats; in exact arithmetic (as
    `eval` computes it) the value is 30, so NumPy forms that round snap first.
    """
    np = _numpy()
    nearest = np.rint(x)
    return np.where(np.abs(x - nearest) <= SNAP * np.abs(x), nearest, x)


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


def _ln(args) -> Fraction:
    if args[0] <= 0:
        raise ValueError("the logarithm of a number at or below 0")
    return Fraction(math.log(args[0]))


def _float_int(args) -> Fraction:
    """Python's `int(a / b * c)` in 64-bit floats: `int(17 / 7 * 98)` is 237, where exactly it is 238."""
    a, b, c = (float(x) for x in args)
    return Fraction(int(a / b * c))


def _extreme(pick):
    """The bounds of `min` or `max` (`pick`): the extreme of the arguments' lows, and of their highs."""
    return lambda args: (pick(a[0] for a in args), pick(a[1] for a in args), all(a[2] for a in args))


def _rounded(fn):
    """The bounds of `floor` or `ceil` (`fn`), which never decrease: their values at the ends."""
    return lambda args: (Fraction(fn(args[0][0])), Fraction(fn(args[0][1])), True)


def _abs_bounds(args):
    low, high, whole = args[0]
    if low >= 0:
        return low, high, whole
    if high <= 0:
        return -high, -low, whole
    return Fraction(0), max(-low, high), whole


def _whole_bounds(args):
    """True when every value is an integer, False when the range holds none; else not decided."""
    low, high, whole = args[0]
    if whole:
        return True
    return False if math.ceil(low) > math.floor(high) else None


def _float_int_bounds(args):
    """For positive arguments, `int(a / b * c)` in floats never falls as a or c grows or b shrinks
    (rounding to the nearest float and truncating both keep order)."""
    (a_low, a_high, _), (b_low, b_high, _), (c_low, c_high, _) = args
    if min(a_low, b_low, c_low) <= 0:
        return None
    return _float_int([a_low, b_high, c_low]), _float_int([a_high, b_low, c_high]), True


def _sympy_rounded(name: str):
    """SymPy's `floor` or `ceiling`, built as SymPy leaves it for a product of symbols and rational numbers
    (none is known to be whole, or to lie between two integers): without the assumption queries that find
    so, most of the cost of expanding a condition.  Anything else SymPy evaluates."""

    def rounded(args):
        sympy = _sympy()
        arg = sympy.sympify(args[0])
        return getattr(sympy, name)(arg, evaluate=not _monomial(arg))

    return rounded


def _sympy_extreme(name: str):
    """SymPy's `Min` or `Max`, built as SymPy leaves it for distinct symbols (it can order none of them)
    without comparing them two by two.  Anything else SymPy evaluates."""

    def extreme(args):
        sympy = _sympy()
        plain = all(isinstance(a, sympy.Symbol) for a in args) and len(set(args)) == len(args)
        return getattr(sympy, name)(*args, evaluate=not plain)

    return extreme


def _monomial(expr) -> bool:
    """A product or power of symbols (none known to be an integer) and rational numbers, not a number."""
    sympy = _sympy()
    return (not expr.is_Number and not expr.has(sympy.Add) and not expr.atoms(sympy.Function)
            and all(a.is_Rational or (a.is_Symbol and a.assumptions0.get("integer") is None) for a in expr.atoms()))


def _truncated(x):
    sympy = _sympy()
    return sympy.Piecewise((sympy.floor(x), x >= 0), (sympy.ceiling(x), True))


def _no_symbolic_form(args):
    raise ValueError("text has no symbolic form")


def _call(name: str) -> Callable:
    return lambda args: f"{name}({', '.join(args)})"


_ATOM_TEXT = re.compile(r"[A-Za-z0-9_.$!\\]+")


def _negated(text: str) -> str:
    """Excel text for minus `text`: `-x`, `x` for `-x`, or `-(a+b)` when `text` is more than a name or number."""
    if text.startswith("-") and _ATOM_TEXT.fullmatch(text[1:]):
        return text[1:]
    return f"-{text}" if _ATOM_TEXT.fullmatch(text) else f"-({text})"


FUNCTIONS = {f.name: f for f in (
    Function("min", 1, None, exact=min, sympy=_sympy_extreme("Min"),
             numpy=lambda args: functools.reduce(_numpy().minimum, args), excel=_call("MIN"), sympy_head="Min",
             bounds=_extreme(min), summary="the smallest argument"),
    Function("max", 1, None, exact=max, sympy=_sympy_extreme("Max"),
             numpy=lambda args: functools.reduce(_numpy().maximum, args), excel=_call("MAX"), sympy_head="Max",
             bounds=_extreme(max), summary="the largest argument"),
    # INT rounds toward minus infinity, like floor
    Function("floor", 1, 1, exact=lambda args: Fraction(math.floor(args[0])), sympy=_sympy_rounded("floor"),
             numpy=lambda args: _numpy().floor(snapped(args[0])), excel=_call("INT"), sympy_head="floor",
             bounds=_rounded(math.floor), summary="the whole number at or below"),
    # -INT(-x) is ceiling(x) for every sign; Excel's CEILING has sign quirks
    Function("ceil", 1, 1, exact=lambda args: Fraction(math.ceil(args[0])), sympy=_sympy_rounded("ceiling"),
             numpy=lambda args: _numpy().ceil(snapped(args[0])), excel=lambda args: f"-INT({_negated(args[0])})",
             excel_binds=NEGATIVE, sympy_head="ceiling", bounds=_rounded(math.ceil), summary="the whole number at or above"),
    Function("abs", 1, 1, exact=lambda args: abs(args[0]), sympy=lambda args: _sympy().Abs(args[0]),
             numpy=lambda args: _numpy().abs(args[0]), excel=_call("ABS"), sympy_head="Abs", bounds=_abs_bounds,
             summary="the value without its sign"),
    Function("whole", 1, 1, exact=lambda args: Fraction(args[0]).denominator == 1,
             sympy=lambda args: _sympy().Eq(_sympy().floor(args[0]), args[0]),
             numpy=lambda args: snapped(args[0]) == _numpy().floor(snapped(args[0])),
             excel=lambda args: f"INT({args[0]})={args[0]}", dims=condition, excel_binds=COMPARISON, bounds=_whole_bounds,
             summary="true when the value is a whole number (`whole(gpus)`)"),
    # a float's logarithm, kept as the Fraction of that float (as a fractional power is)
    Function("ln", 1, 1, exact=_ln, sympy=lambda args: _sympy().log(args[0]),
             numpy=lambda args: _numpy().log(args[0]), excel=_call("LN"), dims=plain_number, sympy_head="log",
             summary="the natural logarithm"),
    # what a program that divides and multiplies in floats reports (vLLM's token count): the NumPy form
    # computes in the same doubles and truncates without snapping; Excel and SymPy give the exact floor
    Function("float_int", 3, 3, exact=_float_int, sympy=lambda args: _truncated(args[0] / args[1] * args[2]),
             numpy=lambda args: _numpy().trunc(args[0] / args[1] * args[2]),
             excel=lambda args: f"TRUNC(({args[0]})/({args[1]})*({args[2]}))", bounds=_float_int_bounds,
             summary="`int(a / b * c)` computed in 64-bit floating point, as Python does (one less than the exact value in rare cases)"),
    # text of a number for a sentence: fixed(tpot_seconds / 1 ms, 1) is "41.2"
    Function("fixed", 2, 2, exact=_fixed, sympy=_no_symbolic_form, numpy=lambda args: _numpy().nan,
             excel=_call("FIXED"), dims=text_of_numbers, text=True,
             summary="the number as text, rounded to the given decimals, with thousands separators"),
)}


def by_sympy_head() -> dict:
    """SymPy function name -> the Function whose SymPy form it is (for printers of SymPy expressions)."""
    return {f.sympy_head: f for f in FUNCTIONS.values() if f.sympy_head}
