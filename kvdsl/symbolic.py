"""Resolved cells -> SymPy expressions.

`cell_expr` gives one cell's own rule over Symbols named `block.cell` (the
rules graph).  `Expander` substitutes rules into each other, stopping at the
cells it is told to keep as symbols, and names those symbols the way a spec
reads from the starting block (`model.layers`, `kv_budget_bytes_per_gpu`).
"""

from __future__ import annotations

from typing import Callable, Optional

import sympy as sp

from . import model as m
from .errors import SolveError
from .functions import FUNCTIONS
from .program import CellRef, Key, Program, decided_text, static_text
from .visitor import ExprVisitor


class TooLarge(SolveError):
    """An expansion through more rules than a readable closed form could hold."""


def to_rational(value):
    """A Fraction, bool or int as a SymPy number."""
    if isinstance(value, bool):
        return sp.true if value else sp.false
    return sp.Rational(value.numerator, value.denominator) if hasattr(value, "denominator") else sp.sympify(value)


_RELATIONS = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "==": sp.Eq, "!=": sp.Ne}


class Converter(ExprVisitor):
    """A resolved kvspec expression as SymPy; `ref` maps each CellRef to SymPy.

    SymPy holds no text: a comparison of texts (`engine == "vllm"`) is decided
    here by `text`, which gives the fixed text of an operand, or None.
    """

    def __init__(self, ref: Callable[[CellRef], sp.Basic], text: Callable = lambda e: None):
        self.ref = ref
        self.text = text

    def visit_Num(self, expr):
        return to_rational(expr.value)

    def visit_Bool(self, expr):
        return sp.true if expr.value else sp.false

    def visit_NoneValue(self, expr):
        return sp.nan

    def visit_CellRef(self, expr):
        return self.ref(expr)

    def visit_Str(self, expr):
        raise SolveError(f"`{expr_source(expr)}` is text: it has no symbolic form", expr.span)

    def visit_Name(self, expr):
        raise TypeError(f"`{expr.dotted}` was never resolved")

    def visit_Unary(self, expr):
        inner = self.visit(expr.operand)
        return sp.Not(inner) if expr.op == "not" else -inner

    def visit_If(self, expr):
        cond = self.visit(expr.cond)
        if cond in (sp.true, sp.false):  # decided here (a text comparison): only the branch taken
            return self.visit(expr.then if cond == sp.true else expr.otherwise)
        return sp.Piecewise((self.visit(expr.then), cond), (self.visit(expr.otherwise), True))

    def visit_Call(self, expr):
        if FUNCTIONS[expr.func].text:
            raise SolveError(f"`{expr_source(expr)}` is text: it has no symbolic form", expr.span)
        return FUNCTIONS[expr.func].sympy([self.visit(a) for a in expr.args])

    def visit_Binary(self, expr):
        op = expr.op
        if op in ("==", "!=") and (self.text(expr.left) is not None or self.text(expr.right) is not None):
            left, right = self.text(expr.left), self.text(expr.right)
            if left is None or right is None:
                raise SolveError(f"`{expr_source(expr)}` compares a text that is not fixed: it cannot be solved or "
                                 "written symbolically", expr.span)
            return sp.true if (left == right) == (op == "==") else sp.false
        if op == "&":
            raise SolveError(f"`{expr_source(expr)}` is text: it has no symbolic form", expr.span)
        a, b = self.visit(expr.left), self.visit(expr.right)
        if op == "and":
            return sp.And(a, b)
        if op == "or":
            return sp.Or(a, b)
        if op in _RELATIONS:
            return _RELATIONS[op](a, b)
        return _ARITHMETIC[op](a, b)


_ARITHMETIC = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
               "^": lambda a, b: a**b}


def convert(expr, ref: Callable[[CellRef], sp.Basic], text: Callable = lambda e: None) -> sp.Basic:
    """A resolved kvspec expression as SymPy (see `Converter`)."""
    return Converter(ref, text).visit(expr)


def symbol_for(key: Key) -> sp.Symbol:
    return sp.Symbol(f"{key[0]}.{key[1]}")


def cell_expr(program: Program, key: Key) -> sp.Basic:
    """One cell's rule over the Symbols of the cells it names directly."""
    rc = program.cells[key]
    return convert(rc.expr, lambda r: symbol_for(r.key), lambda e: static_text(program, e))


def expr_source(expr) -> str:
    from .exprtext import expr_text

    return expr_text(expr, lambda r: r.text)


class Expander:
    """Expands a cell's rule into the rules it depends on.

    Cells for which `stop(key)` is true become symbols, named as the starting
    block reads them; `symbols` maps each such Symbol to its key.
    """

    def __init__(self, program: Program, stop: Callable[[Key], bool], rename: Optional[dict] = None):
        self.program = program
        self.stop = stop
        self.rename = rename or {}
        self.symbols: dict[sp.Symbol, Key] = {}
        self.vias: dict[sp.Symbol, tuple] = {}  # the reference cells a symbol is read through
        self._names: dict[Key, sp.Symbol] = {}
        self._memo: dict[Key, sp.Basic] = {}

    def symbol(self, key: Key, name: str, via: tuple = ()) -> sp.Symbol:
        if key in self.rename:
            return self.rename[key]
        if key in self._names:
            return self._names[key]
        taken = {s.name for s in self.symbols}
        if name in taken:
            name = f"{key[0]}.{key[1]}"
        sym = sp.Symbol(name)
        self._names[key] = sym
        self.symbols[sym] = key
        self.vias[sym] = via
        return sym

    def size(self, key: Key) -> int:
        """The nodes the cell's rule has once every rule it reads is expanded into it (no SymPy)."""
        sizes: dict = {}

        def of_cell(k: Key) -> int:
            if k in self.rename:
                return 1
            if k not in sizes:
                sizes[k] = 1  # a cycle counts once
                sizes[k] = of_expr(self.program.cells[k].expr)
            return sizes[k]

        def of_expr(expr) -> int:
            if isinstance(expr, CellRef):
                if self.stop(expr.key) or self.program.cells[expr.key].form in ("input", "unknown"):
                    return 1
                return of_cell(expr.key)
            if isinstance(expr, m.If):
                decided = decided_text(self.program, expr.cond)
                if decided is not None:
                    return of_expr(expr.then if decided else expr.otherwise)
            children = expr.children() if hasattr(expr, "children") and getattr(expr, "_fields", ()) else ()
            return 1 + sum(of_expr(child) for child in children)

        return of_cell(key)

    def expand(self, key: Key, prefix: str = "", via: tuple = ()) -> sp.Basic:
        if key in self.rename:
            return self.rename[key]
        if (key, prefix) in self._memo:
            return self._memo[(key, prefix)]
        rc = self.program.cells[key]

        def ref(r: CellRef):
            # an engine's cell run by this block (`vllm.num_blocks`, and the names
            # inside it) is read by its own name: no path leads to it
            instanced = not r.via and r.key[0] == key[0]
            name = prefix + (r.key[1] if instanced else r.text)
            chain = via + r.via
            if self.stop(r.key) or self.program.cells[r.key].form in ("input", "unknown"):
                return self.symbol(r.key, name, chain)
            head = "" if instanced else r.text.rpartition(".")[0]
            return self.expand(r.key, prefix + (head + "." if head else ""), chain)

        result = convert(rc.expr, ref, lambda e: static_text(self.program, e))
        self._memo[(key, prefix)] = result
        return result
