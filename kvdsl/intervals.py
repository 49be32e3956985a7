"""The exact rules over a range of one cell's values: bounds that hold every value a rule takes there.

The answer search (`kvdsl/range_search.py`) wants to know where a condition
holds among the integers.  Over a range of the unknown, each rule's values
lie within bounds computed from its arguments' (a sum from the sums of the
ends, `ceil` from the ceilings of the ends, ...); where the bounds decide
the condition, it holds, or fails, at every point of the range at once.
Bounds are exact (Fractions) and sound: the value the exact evaluation
(`kvdsl/evaluate.py`) gives at any point lies within them.  What cannot be
bounded (text, a division by a range that holds 0, a function without a
`bounds` rule) is ANY, and so is a value that is an error at some points
only; the search then splits the range, down to single points, which are
evaluated exactly.
"""

from __future__ import annotations

import operator
from fractions import Fraction

from .errors import KvdslError
from .evaluate import _COMPARE, NONE, Evaluator, _power, _Unknown, text_of
from .functions import FUNCTIONS


class Bounds:
    """Every value a rule takes over the range lies in [lo, hi]; `whole`: each of them is an integer."""

    __slots__ = ("lo", "hi", "whole")

    def __init__(self, lo, hi, whole: bool):
        self.lo, self.hi, self.whole = lo, hi, whole

    def __repr__(self) -> str:
        return f"Bounds({self.lo}, {self.hi}{', whole' if self.whole else ''})"


class _Open:
    """What the bounds leave open (one instance per meaning)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


MAYBE = _Open("MAYBE")  # a condition at every point, true at some and false at others (or not known which)
ANY = _Open("ANY")  # not bounded: any number, text, `none`, or an error at some points of the range

# what the exact evaluation raises where a value cannot be computed (`search.Feasibility` makes it None)
EVERYWHERE = (_Unknown, ArithmeticError, ValueError, KvdslError)

_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_INEXACT = (Bounds, _Open)


def bounds_of(value):
    """(lo, hi, whole) of a number or Bounds; None for anything else (a condition, text, `none`)."""
    if type(value) is Bounds:
        return value.lo, value.hi, value.whole
    if isinstance(value, (Fraction, int)) and not isinstance(value, bool):
        value = Fraction(value)
        return value, value, value.denominator == 1
    return None


def _made(lo, hi, whole: bool):
    """Bounds, or the exact number when they meet."""
    return Fraction(lo) if lo == hi else Bounds(lo, hi, whole)


def truth(value):
    """A value as a condition: True or False at every point, MAYBE, or ANY."""
    if value is ANY or value is MAYBE:
        return value
    if type(value) is Bounds:
        return True if value.lo > 0 or value.hi < 0 else MAYBE
    return bool(value)


def _join(a, b):
    """The bounds of a value that is `a` at some points and `b` at the others."""
    if a is ANY or b is ANY:
        return ANY
    if not isinstance(a, _INEXACT) and not isinstance(b, _INEXACT) and type(a) is type(b) and a == b:
        return a
    x, y = bounds_of(a), bounds_of(b)
    if x is not None and y is not None:
        return _made(min(x[0], y[0]), max(x[1], y[1]), x[2] and y[2])
    if (a is MAYBE or isinstance(a, bool)) and (b is MAYBE or isinstance(b, bool)):
        return MAYBE
    return ANY


def _exact_binary(expr, a, b):
    """`a op b` of two exact values, as the exact evaluation computes it."""
    op = expr.op
    if op in _ARITHMETIC:
        return _ARITHMETIC[op](a, b)
    if op == "/":
        return a / b  # raises at 0, as evaluation does
    if op == "&":
        return text_of(a) + text_of(b)
    if op == "^":
        return _power(expr, a, b)
    return _COMPARE[op](a, b)


def _arithmetic(op: str, a: tuple, b: tuple):
    """The bounds of `a op b` for + - * / from the bounds of each side (ANY past what they bound)."""
    if op == "+":
        return _made(a[0] + b[0], a[1] + b[1], a[2] and b[2])
    if op == "-":
        return _made(a[0] - b[1], a[1] - b[0], a[2] and b[2])
    if op == "/":
        if b[0] <= 0 <= b[1]:
            return ANY
        b = (1 / b[1], 1 / b[0], False)
    elif op != "*":
        return ANY
    ends = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return _made(min(ends), max(ends), op == "*" and a[2] and b[2])


def _comparison(op: str, a: tuple, b: tuple):
    """True or False when the bounds of the two sides decide `a op b` at every point, else MAYBE."""
    if op in (">", ">="):
        op, a, b = "<" if op == ">" else "<=", b, a
    if op == "<":
        return True if a[1] < b[0] else False if a[0] >= b[1] else MAYBE
    if op == "<=":
        return True if a[1] <= b[0] else False if a[0] > b[1] else MAYBE
    apart = a[1] < b[0] or b[1] < a[0]
    if not apart:
        return MAYBE
    return op == "!="


class IntervalEvaluator(Evaluator):
    """Bounds of a resolved expression over a range, given those of the cells it reads.

    A value is exact (the same at every point), Bounds, MAYBE or ANY.  What
    raises one of EVERYWHERE is an error at every point of the range that
    reaches it, as in the exact evaluation (whose leaves this one reads as
    it does); where only some points reach it (one branch of an `if` the
    range does not decide), the value is ANY.
    """

    def visit_Unary(self, expr):
        inner = self.visit(expr.operand)
        if inner is NONE or inner is ANY:
            return inner
        if expr.op == "not":
            decided = truth(inner)
            return decided if isinstance(decided, _Open) else not decided
        if not isinstance(inner, _INEXACT):
            return -inner
        return Bounds(-inner.hi, -inner.lo, inner.whole) if type(inner) is Bounds else ANY

    def visit_If(self, expr):
        decided = self._condition(expr.cond)
        if decided is NONE or decided is ANY:
            return decided
        if decided is not MAYBE:
            return self.visit(expr.then if decided else expr.otherwise)
        return _join(self._some_points(expr.then), self._some_points(expr.otherwise))

    def _condition(self, expr):
        """True, False or MAYBE where `expr` is a condition at every point; NONE or ANY as it is."""
        value = self.visit(expr)
        return NONE if value is NONE else truth(value)

    def _some_points(self, expr):
        """The bounds of `expr` where only some points of the range evaluate it."""
        try:
            return self.visit(expr)
        except EVERYWHERE:
            return ANY

    def visit_Call(self, expr):
        args = [self.visit(a) for a in expr.args]
        if any(a is ANY for a in args):
            return ANY
        if any(a is NONE for a in args):
            return NONE
        function = FUNCTIONS[expr.func]
        if not any(isinstance(a, _INEXACT) for a in args):
            return function.exact(args)
        ranges = [bounds_of(a) for a in args]
        if function.bounds is None or any(r is None for r in ranges):
            return ANY
        result = function.bounds(ranges)
        if result is None:
            return ANY
        return _made(*result) if isinstance(result, tuple) else result

    def visit_Binary(self, expr):
        op = expr.op
        if op == "and" or op == "or":
            return self._logic(expr, op == "or")
        a, b = self.visit(expr.left), self.visit(expr.right)
        if a is ANY or b is ANY:
            return ANY
        if a is NONE or b is NONE:
            return NONE
        if not isinstance(a, _INEXACT) and not isinstance(b, _INEXACT):
            return _exact_binary(expr, a, b)
        x, y = bounds_of(a), bounds_of(b)
        if x is None or y is None:
            return MAYBE if op in ("==", "!=") and (a is MAYBE or b is MAYBE) else ANY
        if op in _COMPARE:
            return _comparison(op, x, y)
        return _arithmetic(op, x, y)

    def _logic(self, expr, decides: bool):
        """`and` (decides False) or `or` (decides True), the left side read first, as evaluation does."""
        first = self._condition(expr.left)
        if first is NONE or first is ANY:
            return first
        if first is not MAYBE:
            return first if first == decides else self._condition(expr.right)
        right = self._some_points(expr.right)
        second = ANY if right is NONE else truth(right)
        if isinstance(second, _Open):
            return second
        return decides if second == decides else MAYBE


def range_values(feasible, order: list, low: int, high: int) -> dict:
    """The bounds of the cells of `order` (in dependency order) with `feasible`'s unknown anywhere in [low, high]."""
    values = dict(feasible.base)
    values[feasible.target] = Fraction(low) if low == high else Bounds(Fraction(low), Fraction(high), True)
    cells = feasible.program.cells
    visit = IntervalEvaluator(values).visit
    for key in order:
        try:
            values[key] = visit(cells[key].expr)
        except EVERYWHERE:
            values[key] = None
        except TypeError:  # what the exact evaluation would not compute either: left to the points
            values[key] = ANY
    return values


def range_holds(feasible, values: dict):
    """True or False when `feasible` holds, or fails, at every point the range `values` bounds; None when open."""
    verdict = truth(values.get(feasible.constraint))
    if verdict is False:
        return False
    for key in feasible.requirements:
        broken = _broken(feasible, values, key)
        if broken is True:
            return False
        if broken is None:
            verdict = MAYBE
    return None if isinstance(verdict, _Open) else True


def _broken(feasible, values: dict, key):
    """Whether the requirement `key` is broken at every point (True), at none (False), or either (None),
    as `Feasibility` counts one (false, unless it is another engine's; or not computed)."""
    value = values.get(key)
    if value is None:
        return True
    if value is ANY:
        return None
    if value is not False and value is not MAYBE:
        return False
    scope = feasible.program.cells[key].scope
    engine = values.get((key[0], "engine"))
    if scope is not None and not isinstance(engine, _INEXACT) and engine != scope:
        return False
    return True if value is False and scope is None or value is False and engine == scope else None

