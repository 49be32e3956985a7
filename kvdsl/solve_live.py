"""A solved cell as a live workbook formula: its closed form over every regime.

`live_form` writes the answer `solve` finds as one expression a spreadsheet
recalculates (the floor of the tightest bound, the ceiling of the loosest),
and refuses one that would show another number than `eval`.
"""

from __future__ import annotations

import sympy as sp

from .display import format_value
from .errors import NoLiveForm, SolveError
from .evaluate import evaluate
from .graph import Program
from .search import CONSTRAINT, depends_on, find_key
from .solve import Solution, expand_constraint, solve
from .solve_algebra import (NoNumber, gaps, larger_than, pieces, real_number, real_roots, relations, relax,
                            rounding_step, sheet_value, substitute_conditions, unbounded_where_zero)
from .symbolic import TooLarge, to_rational


def live_form(program: Program, block: str, cell: str, assume_zeros=False):
    """A closed form for the answer over every regime, for a workbook formula.

    Returns (expression, expander, assumed): the expression's symbols are the
    expander's, so a printer can name them.  The largest integer answer is
    the floor of the tightest bound, the smallest the ceiling of the loosest.
    With `assume_zeros`, the cells that are 0 (or false) now are fixed there,
    which drops the regimes they switch off (sliding layers in a model
    without any); `assumed` names them.  A set of names for `assume_zeros`
    fixes only those of them.
    """
    target = find_key(program, block, cell)
    solution = solve(program, block, cell)
    if solution.value is None:
        raise SolveError(f"cannot write `{block}.{cell}` as a formula: {solution.message}")
    if solution.constraint != CONSTRAINT:
        raise NoLiveForm(f"`{block}.{cell}` meets the workload's targets by search: no formula follows it")
    try:
        x, expander, constraint = expand_constraint(program, block, cell, depends_on(program, target))
    except TooLarge as exc:
        raise NoLiveForm(exc.message) from None
    if larger_than(constraint, LIVE_FORM_NODES):
        raise NoLiveForm(f"the closed form of `{block}.{cell}` is too large for a formula")
    assumed = []
    if assume_zeros:
        values = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))
        zeros = {}
        for symbol, key in expander.symbols.items():
            value = values.get(key)
            chosen = assume_zeros is True or str(symbol) in assume_zeros
            if key != target and chosen and (value is False or (not isinstance(value, bool) and value == 0)):
                zeros[symbol] = sp.false if value is False else 0
                assumed.append(str(symbol))
        constraint = constraint.subs(zeros)
    parts = relations(constraint)
    guarded = [g for g in (_guarded(r, x) for r in parts) if g is not None]
    if any(r.has(x) and not isinstance(r, (sp.Le, sp.Lt, sp.Ge, sp.Gt)) and _guarded(r, x) not in guarded
           for r in parts):
        raise NoLiveForm(f"`{block}.{cell}` must also meet `==` or `!=` conditions: no formula follows them")
    per_relation = _relation_bounds(constraint, guarded, x, solution.direction)
    if not per_relation:
        raise SolveError(f"cannot write `{block}.{cell}` as a formula")
    expr = _tightest(per_relation, solution.direction)
    if isinstance(solution.value, int):
        expr = sp.floor(expr) if solution.direction == "max" else sp.ceiling(expr)
    unmoved = [r for r in parts if not r.has(x) and r is not sp.true]
    if unmoved and solution.direction == "max":  # one no value of x changes fails: none fits, the largest is 0
        expr = sp.Piecewise((expr, sp.And(*unmoved)), (0, True))
    _check_live_form(program, block, cell, expr, expander, solution)
    return expr, expander, sorted(assumed)


def _relation_bounds(constraint, guarded: list, x, direction: str) -> list:
    """The bound on x of each relation of the constraint that has one; an `either or` one holds no bound
    where its condition without x holds (no batch limit, no prefill pool)."""
    out = []
    for gap in gaps(constraint, x):
        bound = _bound(gap, x, direction)
        if bound is not None:
            out.append(bound)
    for free, relation in guarded:
        bound = _bound(gaps(relation, x)[0], x, direction)
        if bound is not None:
            loosest = sp.oo if direction == "max" else sp.S.Zero  # (x is positive)
            out.append(sp.Piecewise((loosest, free), (bound, True)))
    return out


def _tightest(bounds: list, direction: str):
    """The min (largest answer) or max (smallest) of the per-relation bounds, as a spreadsheet's MIN or MAX.

    Built unevaluated but for repeated and unbounded arguments: SymPy's own Min compares every pair of
    arguments symbolically, seconds for a few large bounds, to drop none a spreadsheet needs dropped.
    """
    combine, identity = (sp.Min, sp.oo) if direction == "max" else (sp.Max, -sp.oo)
    kept = list(dict.fromkeys(b for b in bounds if b != identity))
    if len(kept) <= 1:
        return kept[0] if kept else identity
    return combine(*kept, evaluate=False)


def _guarded(relation, x):
    """(condition without x, inequality in x) of `relation` when it is `either or`, the first free of x; else None."""
    if not isinstance(relation, sp.Or):
        return None
    free = [a for a in relation.args if not a.has(x)]
    bound = [a for a in relation.args if a.has(x)]
    if free and len(bound) == 1 and isinstance(bound[0], (sp.Le, sp.Lt, sp.Ge, sp.Gt)):
        return sp.Or(*free), bound[0]
    return None


def _bound(gap, x, direction: str):
    """The bound on x of one relation `gap <= 0` over its regimes, or None when no regime has a root in closed form.

    A `min` or `max` becomes its regimes as the solve's do (`substitute_conditions`), with no value given (the
    formula holds for any): one the constants decide is settled, the others are `if`s, nested ones too, and so
    is an `abs` beside them.
    """
    step = rounding_step(gap, x)
    if gap.has(sp.Min, sp.Max):
        gap = substitute_conditions(gap.replace(lambda e: isinstance(e, sp.Abs), lambda e: e.rewrite(sp.Piecewise)),
                                    {}, nested=True)
    gap = relax(gap)
    branches = []
    for piece, condition in pieces(gap):
        if not piece.has(x):
            continue
        roots = real_roots(piece, x)
        if roots:
            root = unbounded_where_zero(roots[0])
            branches.append((root, condition.subs(x, root), condition))
    if not branches:
        return None
    limits = set.intersection(*[_limits(condition, x, direction) for _, _, condition in branches])
    branches[-1] = (branches[-1][0], sp.true, None)
    bound = sp.Piecewise(*[(root, holds) for root, holds, _ in branches])
    if step is not None:  # x is charged in whole blocks: the answer is a whole number of them
        rounded = sp.floor if direction == "max" else sp.ceiling
        bound = rounded(bound / step) * step
    if limits:  # every regime with a root holds only up to these: past them, no root answers
        bound = (sp.Min if direction == "max" else sp.Max)(bound, *sorted(limits, key=sp.default_sort_key))
    return bound


def _limits(condition, x, direction: str) -> set:
    """The limits on x that a regime's condition sets (`context <= model.context_limit`): x no larger (smaller,
    when the smallest answer is sought) than each.  Read from each part of the condition linear in x with a
    numeric slope."""
    limits = set()
    for part in relations(condition):
        if not isinstance(part, (sp.Le, sp.Lt, sp.Ge, sp.Gt)) or not part.has(x):
            continue
        gap = sp.expand(gaps(part, x)[0])  # part is gap <= 0
        slope = gap.diff(x)
        rest = gap - slope * x
        if slope.is_Number and slope != 0 and not rest.has(x) and (slope > 0) == (direction == "max"):
            limits.add(-rest / slope)
    return limits


LIVE_FORM_NODES = 4000  # a constraint larger than this (every engine rule expanded) is not written as a formula


def _value_at(expr, env):
    """The number the workbook's formula for `expr` shows at the values `env`, or None where it divides by 0."""
    try:
        return real_number(sheet_value(expr, env))
    except NoNumber:
        return None


def _check_live_form(program: Program, block: str, cell: str, expr, expander, solution: Solution) -> None:
    """A formula that would show another number than `eval` is never written: NoLiveForm says why."""
    base = evaluate(program)
    env = {s: to_rational(base[k]) for s, k in expander.symbols.items() if base.get(k) is not None}
    value = _value_at(expr, env)
    if value is None or abs(value - float(solution.value)) > 1e-9 * max(1.0, abs(float(solution.value))):
        answer = format_value(solution.value, solution.dim)
        gives = ("divides by 0 at the spec's values" if value is None
                 else f"gives {format_value(value, solution.dim)} at the spec's values")
        raise NoLiveForm(f"no formula follows `{block}.{cell}`: its closed form {gives}, the exact answer is {answer}")
