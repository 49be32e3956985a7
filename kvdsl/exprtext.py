"""An expression as kvspec text: what `explain`, error messages and the workbook's notes print."""

from __future__ import annotations

from typing import Callable

from . import model as m
from .display import format_value
from .program import CellRef
from .visitor import ExprVisitor

_PRECEDENCE = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "&": 4.5, "+": 5, "-": 5, "*": 6, "/": 6,
               "^": 8}


def quoted(text: str) -> str:
    """Text as a kvspec literal: `"GQA"`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class TextPrinter(ExprVisitor):
    """A resolved expression as kvspec text, each reference printed by `name`.

    Each method takes the precedence of the operator around the node
    (`parent`), and parenthesizes what binds more loosely.
    """

    def __init__(self, name: Callable[[CellRef], str]):
        self.name = name

    def visit_Num(self, expr, parent=0):
        return _number(expr)

    def visit_Bool(self, expr, parent=0):
        return "true" if expr.value else "false"

    def visit_NoneValue(self, expr, parent=0):
        return "none"

    def visit_Str(self, expr, parent=0):
        return quoted(expr.value)

    def visit_CellRef(self, expr, parent=0):
        return self.name(expr)

    def visit_Name(self, expr, parent=0):
        return expr.dotted

    def visit_Unary(self, expr, parent=0):
        inner = self.visit(expr.operand, 7)
        text = f"not {inner}" if expr.op == "not" else f"-{inner}"
        return _wrap(text, 3 if expr.op == "not" else 7, parent)

    def visit_Binary(self, expr, parent=0):
        prec = _PRECEDENCE[expr.op]
        right_prec = prec + (0 if expr.op == "^" else 1)
        left_prec = prec + (1 if expr.op == "^" else 0)
        text = f"{self.visit(expr.left, left_prec)} {expr.op} {self.visit(expr.right, right_prec)}"
        return _wrap(text, prec, parent)

    def visit_Call(self, expr, parent=0):
        return f"{expr.func}({', '.join(self.visit(a) for a in expr.args)})"

    def visit_If(self, expr, parent=0):
        text = f"if {self.visit(expr.cond)} then {self.visit(expr.then)} else {self.visit(expr.otherwise)}"
        return _wrap(text, 0, parent)


def expr_text(expr, name: Callable[[CellRef], str], parent: int = 0) -> str:
    """A resolved expression as kvspec text, each reference printed by `name`."""
    return TextPrinter(name).visit(expr, parent)


def _wrap(text: str, prec: int, parent: int) -> str:
    return f"({text})" if prec < parent else text


def _number(num: m.Num) -> str:
    return format_value(num.value, num.dim)
