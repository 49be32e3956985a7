"""The exact rules evaluated over NumPy arrays: what `sweep`, `plan` and the answer search run.

Values that do not vary stay exact (Fraction, bool, str); only what a varied
cell reaches becomes an array.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

from .evaluate import text_of
from .functions import FUNCTIONS
from .visitor import ExprVisitor


def _floats(value):
    """A value as NumPy takes it: exact numbers become floats, an unknown nan."""
    import numpy as np

    if value is None or type(value).__name__ == "_NotApplicable":
        return np.nan
    if isinstance(value, Fraction):
        return float(value)
    return value


def _scalar(value) -> bool:
    return not hasattr(value, "shape")


class VectorEvaluator(ExprVisitor):
    """`Evaluator` over arrays: the same rules, NumPy where a value varies.

    Values that do not vary stay exact (Fraction, bool, str); an `if` whose
    condition varies takes each branch where its condition holds.
    """

    def __init__(self, values: dict):
        self.values = values

    def visit_Num(self, expr):
        return expr.value

    visit_Bool = visit_Str = visit_Num

    def visit_NoneValue(self, expr):
        return _numpy().nan

    def visit_CellRef(self, expr):
        value = self.values[expr.key]
        return _floats(value) if value is None or type(value).__name__ == "_NotApplicable" else value

    def visit_Name(self, expr):
        raise TypeError(f"`{expr.dotted}` was never resolved")

    def visit_Unary(self, expr):
        inner = self.visit(expr.operand)
        if expr.op == "not":
            return (not inner) if _scalar(inner) else _numpy().logical_not(inner)
        return -inner

    def visit_If(self, expr):
        cond = self.visit(expr.cond)
        if _scalar(cond):
            return self.visit(expr.then if cond else expr.otherwise)
        np = _numpy()
        then, otherwise = _floats(self.visit(expr.then)), _floats(self.visit(expr.otherwise))
        if _is_text(then) or _is_text(otherwise):  # a text that varies: kept as objects, compared with `==`
            return np.where(cond, np.asarray(then, dtype=object), np.asarray(otherwise, dtype=object))
        return np.where(cond, then, otherwise)

    def visit_Call(self, expr):
        args = [self.visit(a) for a in expr.args]
        function = FUNCTIONS[expr.func]
        if _exact(*args):
            return function.exact(args)
        if function.text:  # text: only where nothing it reads varies (sweeps report numbers)
            return _numpy().nan
        return function.numpy([_floats(a) for a in args])

    def visit_Binary(self, expr):
        left, right = self.visit(expr.left), self.visit(expr.right)
        if expr.op == "&":  # text: only where nothing it joins varies (sweeps report numbers)
            return text_of(left) + text_of(right) if _scalar(left) and _scalar(right) else _numpy().nan
        return _vector_binary(expr.op, left, right)


def vector_value(expr, values: dict):
    """The value of a resolved expression over arrays (see `VectorEvaluator`)."""
    return VectorEvaluator(values).visit(expr)


def _numpy():
    import numpy

    return numpy


def _is_text(value) -> bool:
    """A text, or an array of texts (a reference cell varied over blocks)."""
    return isinstance(value, str) or (hasattr(value, "dtype") and value.dtype.kind in "UO")


def _exact(*values) -> bool:
    return all(_scalar(v) and v is not None and not (isinstance(v, float) and math.isnan(v)) for v in values)


_OPS = {  # op -> (exact Python, NumPy ufunc name)
    "and": (lambda a, b: bool(a) and bool(b), "logical_and"), "or": (lambda a, b: bool(a) or bool(b), "logical_or"),
    "+": (operator.add, "add"), "-": (operator.sub, "subtract"), "*": (operator.mul, "multiply"),
    "/": (operator.truediv, "true_divide"), "<": (operator.lt, "less"), "<=": (operator.le, "less_equal"),
    ">": (operator.gt, "greater"), ">=": (operator.ge, "greater_equal"), "==": (operator.eq, "equal"),
    "!=": (operator.ne, "not_equal"), "^": (None, "power"),
}


def _vector_binary(op: str, a, b):
    import numpy as np

    exact, ufunc = _OPS[op]
    if _is_text(a) or _is_text(b):
        if op in ("==", "!=") and _is_text(a) and _is_text(b):
            if _scalar(a) and _scalar(b):
                return (a == b) == (op == "==")
            same = np.asarray(a, dtype=object) == np.asarray(b, dtype=object)
            return same if op == "==" else np.logical_not(same)
        return np.nan  # text beside a number, or text that varies in a sentence: sweeps report numbers
    if _exact(a, b):
        small_power = op == "^" and isinstance(b, Fraction) and b.denominator == 1 and abs(b) <= 64 and not (a == 0 and b < 0)
        if small_power or (exact is not None and not (op == "/" and b == 0)):
            return a ** int(b) if op == "^" else exact(a, b)
    return getattr(np, ufunc)(_floats(a), _floats(b))
