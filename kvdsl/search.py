"""Exact numeric search for the answer of a constraint: no SymPy.

`eval` solves `?` cells here, so it never imports SymPy; `solve` starts the
same search from its closed form.  The constraint is assumed monotone in the
unknown (kvdsl only accepts `<`, `<=`, `>`, `>=` joined by `and`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

from .errors import KvdslError, UsageError, did_you_mean
from .evaluate import _Unknown, evaluate_expr, requirements_hold
from .graph import Key, Program
from .units import TOKENS, Dim

SEARCH_LIMIT = 10**15


def depends_on(program: Program, target: Key) -> set:
    """Every cell whose value depends on `target` (including target itself)."""
    return set(program.dependents(target))


class Feasibility:
    """Re-evaluates only the cells that depend on the unknown, exactly."""

    def __init__(self, program: Program, base: dict, target: Key, constraint: Key):
        self.program = program
        self.base = base
        self.target = target
        self.constraint = constraint
        affected = depends_on(program, target)
        self.order = [k for k in program.in_order(affected) if k != target
                      and program.cells[k].form in ("rule", "input", "require")]

    def values(self, x) -> dict:
        values = dict(self.base)
        values[self.target] = Fraction(x)
        for key in self.order:
            try:
                values[key] = evaluate_expr(self.program.cells[key].expr, values)
            except (_Unknown, ArithmeticError, ValueError, KvdslError):  # division by zero: not a valid point
                values[key] = None
        return values

    def __call__(self, x) -> bool:
        return bool(self.values(x).get(self.constraint))


def find_key(program: Program, block: str, dotted: str) -> Key:
    """`batch`, `model.window` or `vllm.num_blocks`, read from `block`, -> the key of that cell."""
    if dotted in program.blocks[block].cells:
        return (block, dotted)
    parts = dotted.split(".")
    current = block
    for i, part in enumerate(parts):
        info = program.blocks[current]
        if part not in info.cells:
            raise UsageError(f"{info.kind} `{current}` has no cell `{part}`", hint=did_you_mean(part, info.cells))
        if i == len(parts) - 1:
            return (current, part)
        rc = program.cells[(current, part)]
        if rc.ref_target is None:
            raise UsageError(f"`{'.'.join(parts[: i + 1])}` is not a reference to a block")
        current = rc.ref_target
    raise UsageError(f"no cell `{dotted}`")


def integer_quantity(program: Program, key: Key, base: dict) -> bool:
    rc = program.cells[key]
    if rc.dim == TOKENS:
        return True
    if not (isinstance(rc.dim, Dim) and rc.dim.dimensionless):
        return False
    value = base.get(key)
    if value is None:  # a `?`: whole if the nearest value it hides is (a `--set X=?` hides the spec's `X = ?` first)
        for cell in rc.shadowed:
            value = getattr(getattr(cell, "expr", None), "value", None)
            if value is not None:
                break
    return isinstance(value, (int, Fraction)) and Fraction(value).denominator == 1


def integer_search(feasible, relaxed: Optional[float], direction: str) -> Optional[int]:
    """The largest (direction "max") or smallest ("min") integer n >= 1 that fits.

    Starts at the relaxed answer and gallops, then bisects: the constraint is
    monotone in n, rounding only moves the boundary by a few steps.
    """
    toward = 1 if direction == "max" else -1  # the direction in which n stops fitting
    if relaxed is not None and relaxed > 0:
        start = max(int(math.floor(relaxed) if direction == "max" else math.ceil(relaxed)), 1)
    else:
        start = 1
    if feasible(start):
        good, bad = start, gallop(feasible, start, toward, want=False)
    else:
        bad, good = start, gallop(feasible, start, -toward, want=True)
        if good is None:
            return None
    if bad is None:
        return SEARCH_LIMIT if direction == "max" else 1
    while abs(good - bad) > 1:
        mid = (good + bad) // 2
        if feasible(mid):
            good = mid
        else:
            bad = mid
    return good


def real_search(feasible):
    """(boundary, direction) of a constraint with no closed form, to about 12 significant digits."""
    low, high = Fraction(1), Fraction(2)
    if feasible(low):
        while feasible(high):
            low, high = high, high * 2
            if high > SEARCH_LIMIT:
                return None, "max"
        good, bad, direction = low, high, "max"
    else:
        while not feasible(high):
            high *= 2
            if high > SEARCH_LIMIT:
                return None, "min"
        good, bad, direction = high, high / 2, "min"
    while abs(good - bad) > abs(good) * Fraction(1, 10**12):
        mid = (good + bad) / 2
        mid = mid.limit_denominator(10**15)
        if feasible(mid):
            good = mid
        else:
            bad = mid
    return good, direction


def gallop(feasible, start: int, step_sign: int, want: bool) -> Optional[int]:
    """The first n from `start` in doubling steps for which feasible(n) == want, or None."""
    step = 1
    while True:
        n = start + step_sign * step
        if n < 1:
            if want:
                return None
            return 0  # n = 0 never fits: the boundary is at 1
        if n > SEARCH_LIMIT:
            return None
        if feasible(n) == want:
            return n
        step *= 2


ALLOWED_STEPS = 1024


def allowed_integer(program: Program, feasible: Feasibility, value: int, direction: str) -> Optional[int]:
    """The integer nearest `value` that still fits and breaks no `require`, or None.

    Some requirements hold only at some counts (an engine splits 32 heads over
    1, 2, 4 or 8 GPUs, not 3): from the boundary, step the way that keeps
    `fits` true until every requirement holds.
    """
    step = -1 if direction == "max" else 1
    for n in range(value, value + step * ALLOWED_STEPS, step):
        if n < 1:
            return None
        values = feasible.values(n)
        if not values.get(feasible.constraint):
            return None
        if requirements_hold(program, values):
            return n
    return None


def _plain_conjunction(expr) -> bool:
    """True for comparisons `<`, `<=`, `>`, `>=` joined by `and` (what a search can trust)."""
    from . import model as m

    if isinstance(expr, m.Binary) and expr.op == "and":
        return _plain_conjunction(expr.left) and _plain_conjunction(expr.right)
    return isinstance(expr, m.Binary) and expr.op in ("<", "<=", ">", ">=")


def solve_numeric(program: Program, block: str, cell: str, base: dict) -> Optional[tuple]:
    """(value, verified) for `block.cell` by search alone, or None when the direction is unclear.

    The answer is the largest value that fits when 1 fits, the smallest when it
    does not; a constraint that holds at both ends (more GPUs always fit) is
    left to the symbolic solver.
    """
    target = (block, cell)
    if not _plain_conjunction(program.cells[(block, "fits")].expr):
        return None
    feasible = Feasibility(program, base, target, (block, "fits"))
    if integer_quantity(program, target, base):
        if feasible(1) and feasible(SEARCH_LIMIT):
            return None
        direction = "max" if feasible(1) else "min"
        value = integer_search(feasible, None, direction)
        if value is None:
            return None
        step = 1 if direction == "max" else -1
        verified = feasible(value) and (value + step < 1 or not feasible(value + step))
        allowed = allowed_integer(program, feasible, value, direction)
        if allowed is None:
            return None
        value = allowed
    else:
        value, direction = real_search(feasible)
        if value is None:
            return None
        verified = True
    if not requirements_hold(program, feasible.values(value)):
        return None
    return Fraction(value), verified
