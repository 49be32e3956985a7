"""Numeric evaluation of a program, exactly.

Numbers are `Fraction`s, so integer byte counts never pass through floats:
`0.9 * 80 GiB` is exactly 77,309,411,328 bytes.  A `?` cell has no value
until it is solved; cells that depend on it have none either.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Optional

from . import model as m
from .errors import EvaluationError, KvdslError, raise_all
from .functions import FUNCTIONS
from .program import CellRef, Form, Key, Program
from .visitor import ExprVisitor


class _Unknown(Exception):
    """Raised inside evaluation when a value depends on an unsolved cell."""


class _NotApplicable:
    """The value of `none`: a cell that has no value here (a deployment that does not run has no cost).

    It spreads as a spreadsheet's #N/A does: any arithmetic, comparison, text
    or function of it is `none`, and so is an `if` on it.
    """

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "none"

    def __reduce__(self):
        return (_NotApplicable, ())


NONE = _NotApplicable()


class Evaluator(ExprVisitor):
    """The exact value of a resolved expression, given the values of the cells it uses."""

    def __init__(self, values: dict):
        self.values = values

    def visit_CellRef(self, expr):
        value = self.values[expr.key]
        if value is None:
            raise _Unknown
        return value

    def visit_Num(self, expr):
        return expr.value

    visit_Bool = visit_Str = visit_Num

    def visit_NoneValue(self, expr):
        return NONE

    def visit_Name(self, expr):
        raise TypeError(f"`{expr.dotted}` was never resolved")

    # hazard: evaluation visits every node of every rule; the methods below
    # recurse through the table itself (one call per node), not through `visit`
    def visit_If(self, expr):
        cond = expr.cond
        decided = self._table[cond.__class__](self, cond)
        if decided is NONE:
            return NONE
        branch = expr.then if decided else expr.otherwise
        return self._table[branch.__class__](self, branch)

    def visit_Call(self, expr):
        table = self._table
        args = [table[a.__class__](self, a) for a in expr.args]
        return NONE if any(a is NONE for a in args) else FUNCTIONS[expr.func].exact(args)

    def visit_Unary(self, expr):
        operand = expr.operand
        inner = self._table[operand.__class__](self, operand)
        if inner is NONE:
            return NONE
        return (not inner) if expr.op == "not" else -inner

    def visit_Binary(self, expr):
        op = expr.op
        table = self._table
        left, right = expr.left, expr.right
        if op == "and" or op == "or":
            a = table[left.__class__](self, left)
            if a is NONE:
                return NONE
            if bool(a) == (op == "or"):  # decided by the left side
                return bool(a)
            b = table[right.__class__](self, right)
            return NONE if b is NONE else bool(b)
        a = table[left.__class__](self, left)
        b = table[right.__class__](self, right)
        if a is NONE or b is NONE:
            return NONE
        if op == "+":
            return a + b
        if op == "*":
            return a * b
        if op == "-":
            return a - b
        if op == "/":
            if b == 0:
                raise EvaluationError(f"division by zero: `{_text(expr.right)}` is 0", expr.span)
            return a / b
        if op == "&":
            return text_of(a) + text_of(b)
        if op == "^":
            return _power(expr, a, b)
        return _COMPARE[op](a, b)


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def evaluate_expr(expr, values: dict):
    """The value of a resolved expression, given the values of the cells it uses."""
    return Evaluator(values).visit(expr)


def text_of(value) -> str:
    """A value joined into text by `&`: whole numbers plain, others to 10 significant digits."""
    if isinstance(value, str):
        return value
    if isinstance(value, Fraction) and value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.10g}"


MAX_BITS = 400  # numerators and denominators stay below 2^400 (about 10^120)


def _power(expr, a, b):
    if isinstance(b, Fraction) and b.denominator == 1:
        if a == 0 and b < 0:
            raise EvaluationError("division by zero: 0 raised to a negative power", expr.span)
        size = max(abs(a.numerator).bit_length(), a.denominator.bit_length()) if isinstance(a, Fraction) else 64
        if size * abs(b) > MAX_BITS // 2:
            # too many digits to keep exactly: a float, and a vanishing power is 0
            try:
                approx = float(a) ** int(b)
            except (OverflowError, ZeroDivisionError):
                raise EvaluationError("the power is out of range", expr.span) from None
            if math.isinf(approx) or abs(approx) > 1e100:
                raise EvaluationError("the power is out of range", expr.span)
            return Fraction(approx) if abs(approx) >= 1e-100 else Fraction(0)
        return a ** int(b)
    if a < 0:
        raise EvaluationError("a negative number raised to a fractional power", expr.span)
    return Fraction(float(a) ** float(b))


def _in_range(value, rc):
    if value is NONE:
        return value
    if isinstance(value, Fraction) and max(abs(value.numerator).bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise EvaluationError(f"`{rc.name}` is out of range (beyond 10^120 or closer to 0 than 10^-120)", rc.cell.span)
    return value


def _text(expr) -> str:
    from .exprtext import expr_text

    return expr_text(expr, lambda ref: ref.text)


def evaluate(program: Program, solved: Optional[dict] = None, known: Optional[dict] = None,
             unchecked: frozenset = frozenset()) -> dict:
    """Values of every cell: Fraction, bool, str (text and block references) or None.

    `known` holds values from an earlier pass without `solved`: a cell it has a
    value for does not depend on any `?` cell, so that value stands.  The
    requirements in `unchecked` may be broken (they depend on a cell being solved for).
    """
    plain = not solved and not known
    if plain and program.evaluated:
        values, errors = dict(program.evaluated[0]), list(program.evaluated[1])
        raise_all(broken_requirements(program, values, unchecked) or errors)
        return values
    values, errors = _values(program, solved, known or {})
    if plain:  # the values do not depend on `unchecked`: only which broken requirements are errors
        program.evaluated = (dict(values), list(errors))
    failed = broken_requirements(program, values, unchecked)
    raise_all(failed or errors)
    return values


def plain_values(program: Program, known: dict) -> tuple:
    """(values, errors) of the evaluation without solved cells, taking the values `known` has (not None)
    as they are: `program.evaluated` of a program whose other cells are those of one evaluated before."""
    return _values(program, None, known)


def _values(program: Program, solved: Optional[dict], known: dict) -> tuple:
    values: dict[Key, object] = {}
    errors: list[KvdslError] = []
    visit = Evaluator(values).visit
    for key in program.order:
        rc = program.cells[key]
        if known.get(key) is not None:
            values[key] = known[key]
        elif rc.form == Form.TEXT:
            values[key] = rc.cell.text if rc.cell.form == "text" else pattern_text(rc.cell.source.split("=", 1)[1])
        elif rc.form == "ref":
            values[key] = rc.ref_target
        elif rc.form == "unknown":
            values[key] = (solved or {}).get(key)
        else:  # input, rule, require
            try:
                values[key] = _in_range(visit(rc.expr), rc)
            except _Unknown:
                values[key] = None
            except EvaluationError as exc:
                errors.append(exc)
                values[key] = None
            except (OverflowError, ValueError, ZeroDivisionError) as exc:
                errors.append(EvaluationError(f"cannot compute `{rc.name}`: {exc}", rc.span))
                values[key] = None
    return values, errors


def requirements_hold(program: Program, values: dict) -> bool:
    """True when no `require` condition is false (without building the errors)."""
    return not any(_broken(program, values, (info.name, name)) for info in program.blocks.values() for name in info.requirements)


def _broken(program: Program, values: dict, key) -> bool:
    """A requirement that is false, unless it belongs to an engine the deployment does not run."""
    if values.get(key) is not False:
        return False
    scope = program.cells[key].scope
    return scope is None or values.get((key[0], "engine")) == scope


def broken_requirements(program: Program, values: dict, unchecked: frozenset = frozenset()) -> list:
    """An error for each `require` condition that the values break (but those in `unchecked`)."""
    errors = []
    for info in program.blocks.values():
        for name in info.requirements:
            if _broken(program, values, (info.name, name)) and (info.name, name) not in unchecked:
                errors.append(_requirement_error(program, values, program.cells[(info.name, name)]))
    return errors


def _culprit(program: Program, refs: list):
    """The cell to point at: a `--set` the condition depends on, else a user's line, else the first named."""
    from .errors import OPTION_PREFIX
    from .program import walk_refs

    seen, queue, user = set(refs), list(refs), None
    while queue:
        rc = program.cells[queue.pop(0)]
        path = rc.span.path
        if path.startswith(OPTION_PREFIX):
            return rc
        if user is None and not path.startswith("kvdsl/prelude/"):
            user = rc
        for ref in walk_refs(rc.expr if rc.form in ("rule", "require") else None):
            if ref.key not in seen:
                seen.add(ref.key)
                queue.append(ref.key)
    return user or (program.cells[refs[0]] if refs else None)


def _why_false(program: Program, values: dict, key, depth: int = 0) -> list:
    """Why a condition cell is false: the values compared by the false conjuncts of the cells it reads."""
    rc = program.cells[key]
    if depth > 4 or rc.form != "rule" or values.get(key) is not False:
        return []
    return _false_parts(program, values, rc, taken_branches(rc.expr, values), depth)


def _false_parts(program: Program, values: dict, rc, expr, depth: int) -> list:
    from .display import format_value
    from .program import walk_refs

    if isinstance(expr, CellRef):
        return _why_false(program, values, expr.key, depth + 1)
    if isinstance(expr, m.Binary) and expr.op == "and":
        sides = [side for side in (expr.left, expr.right) if _holds(side, values) is False]
        return [reason for side in sides for reason in _false_parts(program, values, rc, side, depth)]
    if depth == 0:
        return []
    refs = list(dict.fromkeys(ref.key for ref in walk_refs(expr)))
    shown = ", ".join(f"`{k[1]}` = {format_value(values.get(k), program.cells[k].dim)}" for k in refs)
    return [f"`{rc.name}` is false ({shown})"]


def _holds(expr, values: dict):
    try:
        return evaluate_expr(expr, values)
    except Exception:  # a value that is not known
        return None


def _requirement_error(program: Program, values: dict, rc) -> EvaluationError:
    from .display import format_value
    from .program import walk_refs

    refs = list(dict.fromkeys(ref.key for ref in walk_refs(rc.expr)))
    culprit = _culprit(program, refs) or rc
    shown = ", ".join(f"`{k[1]}` = {format_value(values.get(k), program.cells[k].dim)}" for k in refs)
    condition = rc.cell.source.split(None, 1)[1] if " " in rc.cell.source else rc.cell.source
    where = f"{program.blocks[rc.block].kind} `{rc.block}`"
    reasons = [reason for k in refs for reason in _why_false(program, values, k)]
    shown += "".join(f"; {reason}" for reason in dict.fromkeys(reasons))
    return EvaluationError(f"{where} breaks `require {condition}`: {shown}", culprit.span,
                           hint=f"required at {rc.span.path}:{rc.span.line}")


def taken_branches(expr, values: dict, held: list = None):
    """`expr` with every `if` whose condition has a value reduced to the branch it takes.

    The conditions that held (and chose a `then` branch) are appended to `held`.
    """
    if isinstance(expr, m.If):
        try:
            cond = evaluate_expr(expr.cond, values)
        except Exception:  # a value that is not known: keep both branches
            cond = None
        if isinstance(cond, bool):
            if cond and held is not None:
                held.append(expr.cond)
            return taken_branches(expr.then if cond else expr.otherwise, values, held)
    children = expr.children()
    return expr.replace([taken_branches(c, values, held) for c in children]) if children else expr


def pattern_text(written: str) -> str:
    """A layer pattern as a value: in kvspec's one layout, whatever the spacing it was written with
    (`[[sliding(1024)] * 5, full] * 10`), so that `fmt` never changes what a spec evaluates to."""
    import re

    tight = re.sub(r"\s+", "", written)
    return re.sub(r"\s*([*+=])\s*", r" \1 ", tight).replace(",", ", ")
