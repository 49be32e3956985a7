"""Symbolic what-if: solve a block's constraint (`fits`) for any one cell.

The constraint is expanded into the rules that depend on the asked-for cell,
everything else stays a symbol named as the spec names it.  Rounding
(`ceil`, `floor`) is relaxed to find the closed form; `min`, `max` and `if`
split it into regimes.  The integer answer a user means (the largest batch,
the smallest GPU count) is then found on the exact rules, rounding included,
and checked by substituting it back.

The algebra on SymPy expressions is `solve_algebra.py`, the messages and the
drawn answer `solve_text.py`, the workbook's live formula `solve_live.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

import sympy as sp

from .display import format_value
from .errors import SolveError, UsageError
from .evaluate import evaluate
from .graph import Key, Program
from .search import CONSTRAINT, Feasibility, constraint_for, depends_on, find_key, integer_quantity
from .solve_algebra import (at_values, condition_text, real_number, relation_text, relations, relaxed_bounds, stand_in,
                            tidy)
from .solve_text import nearest_text, no_target_answer, why_not
from .symbolic import Expander, TooLarge, to_rational
from .units import Dim
from .windows import search_answer


@dataclass
class Regime:
    """One branch of a closed form: when it holds, the answer there, whether the given values fall in it."""

    condition: str
    expression: str
    active: bool


@dataclass
class Solution:
    """The answer to `solve --for CELL`: closed form, number, regimes, or why there is none."""

    block: str
    cell: str
    unit: Optional[str]
    dim: object
    expression: Optional[sp.Basic] = None
    value: object = None  # int for integer quantities, Fraction otherwise
    relaxed: Optional[float] = None
    direction: str = "max"
    regimes: list = field(default_factory=list)
    limits: list = field(default_factory=list)  # other bounds that do not bind: (expression, value)
    message: Optional[str] = None
    verified: bool = False
    constraint: str = CONSTRAINT  # the condition solved: `fits`, or `meets_targets` when the workload asks
    windows: object = None  # search.Windows of an integer cell: every run of values where the condition holds
    env: Optional[dict] = field(default=None, repr=False)
    binding: object = field(default=None, repr=False)

    def to_json(self) -> dict:
        value = self.value
        if isinstance(value, Fraction):
            value = value.numerator if value.denominator == 1 else float(value)
        return {
            "block": self.block,
            "cell": self.cell,
            "expression": sp.sstr(self.expression) if self.expression is not None else None,
            "value": value,
            "unit": self.unit,
            "regimes": [{"condition": r.condition, "expression": r.expression, "active": r.active} for r in self.regimes],
            "message": self.message,
            "constraint": self.constraint,
            "windows": self.windows.to_json() if self.windows is not None else None,
        }


def solve(program: Program, block: str, cell: str, symbolic=(), others: bool = True,
          unchecked: frozenset = frozenset()) -> Solution:
    """Solve `block`'s `fits` for `cell`, every other cell given.

    `?` cells of other blocks are solved first (`others`), each on its own.
    Requirements in `unchecked` are not checked on the spec's values.
    """
    # hazard: SymPy's Add.flatten imports sympy.tensor.tensor on every call,
    # only to test isinstance(term, TensExpr); no kvdsl expression is a tensor,
    # and the import costs a tenth of a solve
    with stand_in("sympy.tensor.tensor", "TensExpr", "TensAdd"):
        return _solve(program, block, cell, symbolic, others, unchecked)


def _solve(program: Program, block: str, cell: str, symbolic, others: bool, unchecked: frozenset) -> Solution:
    target = find_key(program, block, cell)
    if target[0] != block:
        raise UsageError(f"solve for a cell of the block itself, not `{cell}`", hint=f"use --block {target[0]} --for {target[1]}")
    if (block, CONSTRAINT) not in program.cells:
        raise SolveError(f"block `{block}` has no `{CONSTRAINT}` constraint to solve")
    rc = program.cells[target]
    if rc.form in ("text", "ref") or not isinstance(rc.dim, Dim):
        raise UsageError(f"`{cell}` is not a number: solve for a number such as batch, context or gpus")
    if program.cells[(block, CONSTRAINT)].dim != "bool":
        raise SolveError(f"`{CONSTRAINT}` in block `{block}` must be a condition", program.cells[(block, CONSTRAINT)].span)
    other = [n for n in program.blocks[block].cells if program.cells[(block, n)].form == "unknown" and n != cell]
    if other:
        raise UsageError(f"block `{block}` also has `{other[0]} = ?`: give it a value to solve for `{cell}`",
                         hint=f"e.g. --set {other[0]}=...")
    keep = {find_key(program, block, name) for name in symbolic}
    affected = depends_on(program, target)
    # the spec's own value of the cell solved for may break a requirement that the answer keeps
    unchecked = unchecked | frozenset(k for k in affected if program.cells[k].form == "require")
    base = evaluate(program, _other_unknowns(program, target, unchecked) if others else {}, unchecked=unchecked)
    unit = rc.dim.unit() if isinstance(rc.dim, Dim) else None
    solution = Solution(block, cell, unit, rc.dim)
    solution.constraint = constraint_for(program, block, cell, base)
    if (block, solution.constraint) not in affected or target == (block, solution.constraint):
        solution.message = f"`{solution.constraint}` does not depend on `{cell}`"
        return solution
    integer = integer_quantity(program, target, base)
    expanded = None
    if solution.constraint == CONSTRAINT:
        try:
            expanded = expand_constraint(program, block, cell, affected)
        except TooLarge:
            solution.message = "no closed form: the condition reads more rules than a formula a reader could follow"
    if expanded is not None:
        x, expander, constraint = expanded
        env = {s: to_rational(base[k]) for s, k in expander.symbols.items() if base.get(k) is not None}
        # the cells at 0 or false now are fixed there (a prefill pool of no GPUs, an engine without a batch limit):
        # the conditions they decide drop out
        zeros = {sym: (sp.false if value is sp.false else 0) for sym, value in env.items()
                 if (value is sp.false or value == 0) and expander.symbols[sym] not in keep}
        constraint = constraint.xreplace(zeros)
        _check_monotone_form(constraint, x, block, cell, integer)
        try:
            bounds = relaxed_bounds(constraint, x, env)
        except TooLarge as exc:
            expanded, solution.message = None, f"no closed form: {exc.message}"
        else:
            _closed_form(solution, bounds, env, x)
    if not integer and solution.expression is not None and _exact_real(solution, program, base, target):
        found = None
    else:
        found = search_answer(program, block, cell, base, solution.constraint, near=solution.relaxed)
        _take(solution, found, integer)
    if solution.constraint == CONSTRAINT and expanded is None:
        if solution.value is None and not (found is not None and found.windows is not None and found.windows.spans):
            solution.message = f"no `{cell}` satisfies `{CONSTRAINT}`" + nearest_text(program, base, target, found)
    elif solution.constraint == CONSTRAINT:
        if solution.expression is None and solution.value is not None:
            solution.message = "no closed form: the answer is where a condition of the rules changes, found by search"
        if not integer:
            _check_requirements(program, solution, Feasibility(program, base, target, (block, CONSTRAINT)))
        if solution.expression is not None:
            _regimes(solution, env, x, {s for s, k in expander.symbols.items() if k in keep})
        if solution.value is None and solution.message is None:
            solution.message = why_not(program, block, cell, base, constraint, x, env, found)
    elif solution.value is None and solution.message is None:
        solution.message = no_target_answer(program, block, cell, base, found)
    return solution


def _take(solution: Solution, found, integer: bool) -> None:
    """The search's answer: the documented end of its windows, or the boundary of a real number."""
    solution.direction = found.direction
    solution.windows = found.windows
    if found.value is None:
        if found.windows is not None and found.windows.spans:
            solution.message = (f"`{solution.cell}` is not bounded: the constraint holds for every value from "
                                f"{found.windows.spans[-1][0]:,}")
        return
    solution.value = int(found.value) if integer else found.value
    solution.verified = found.verified


def _exact_real(solution: Solution, program: Program, base: dict, target: Key) -> bool:
    """A real number's answer from its closed form, exactly, when it holds there (True if taken)."""
    exact = at_values(solution.expression, solution.env)
    value = Fraction(str(exact)) if exact.is_Rational else Fraction(solution.relaxed)
    feasible = Feasibility(program, base, target, (target[0], CONSTRAINT))
    if not feasible.values(value).get(feasible.constraint):
        return False
    solution.value, solution.verified = value, True
    return True


EXPANDED_NODES = 3000  # the largest condition, every rule it reads expanded, built as a closed form


def expand_constraint(program: Program, block: str, cell: str, affected: set):
    """(x, expander, fits): the constraint expanded through the cells that depend on `cell`, now x.

    Raises TooLarge past EXPANDED_NODES nodes (counted before SymPy builds anything).
    """
    x = sp.Symbol(cell, positive=True)
    expander = Expander(program, stop=lambda key: key not in affected, rename={(block, cell): x})
    if expander.size((block, CONSTRAINT)) > EXPANDED_NODES:
        raise TooLarge(f"`{CONSTRAINT}` of `{block}` reads more rules than a closed form a reader could follow")
    return x, expander, expander.expand((block, CONSTRAINT))


def _check_monotone_form(constraint, x, block: str, cell: str, integer: bool) -> None:
    """A real number is solved for a boundary: the constraint must be made of <, <=, >, >= joined by `and`.

    An integer cell may also meet `==` and `!=` (the heads an engine splits
    evenly): the search tries every value, and the closed form shows the inequalities.
    """
    if integer:
        return
    for relation in relations(constraint):
        if relation.has(x) and not isinstance(relation, (sp.Le, sp.Lt, sp.Ge, sp.Gt)):
            raise SolveError(
                f"cannot solve `{block}.{cell}`: `{CONSTRAINT}` uses `{relation_text(relation)}`; kvdsl solves conditions "
                f"made of <, <=, >, >= joined by `and`")


def _other_unknowns(program: Program, target: Key, unchecked: frozenset) -> dict:
    """Values for the `?` cells of other blocks that `target`'s block reads, solved each against its own block."""
    solved = {}
    for key, rc in program.cells.items():
        if rc.form == "unknown" and key[0] != target[0] and not program.blocks[key[0]].prelude \
                and any(reader[0] == target[0] for reader in program.dependents(key)):
            answer = solve(program, key[0], key[1], others=False, unchecked=unchecked)
            if answer.value is not None:
                solved[key] = Fraction(answer.value)
    return solved


def _check_requirements(program: Program, solution: Solution, feasible) -> None:
    """An answer that breaks a `require` (utilization above 1, say) is no answer."""
    from .evaluate import broken_requirements

    if solution.value is None:
        return
    broken = broken_requirements(program, feasible.values(solution.value))
    if broken:
        value = format_value(solution.value, solution.dim)
        solution.message = f"the answer {value} breaks a requirement: {broken[0].message}"
        solution.value, solution.verified = None, False


def _closed_form(solution: Solution, bounds: list, env: dict, x) -> None:
    """The binding relation and regime of the relaxed constraint: the closed form shown beside the answer."""
    limits = []
    for regimes in bounds:
        active = []
        for condition, root, slope in regimes:
            value = real_number(at_values(root, env))
            holds = value is not None and value > 0 and bool(at_values(condition, env).subs(x, value))
            if holds:
                active.append((regimes, condition, root, value, slope))
        if active:
            limits.append(min(active, key=lambda c: c[3]))
    if not limits:
        return
    slopes = [c[4] for c in limits if c[4] is not None]
    direction = "min" if slopes and all(s < 0 for s in slopes) else "max"
    binding = (min if direction == "max" else max)(limits, key=lambda c: c[3])
    solution.expression, solution.relaxed = tidy(binding[2]), binding[3]
    solution.limits = [(tidy(c[2]), c[3]) for c in limits if c is not binding]
    solution.env, solution.binding = env, binding


def _regimes(solution: Solution, env: dict, x, keep: set) -> None:
    """The binding relation's regimes, the one the answer falls in marked."""
    point = solution.value if solution.value is not None else solution.relaxed
    shown = {s: v for s, v in env.items() if s not in keep}
    binding_form = solution.expression
    for condition, root, _ in solution.binding[0]:
        form = binding_form if root is solution.binding[2] else tidy(root)
        cond = at_values(condition, env)
        is_active = point is not None and bool(cond.subs(x, to_rational(Fraction(point))))
        solution.regimes.append(Regime(condition_text(condition, shown), sp.sstr(form), is_active))
        if is_active and solution.value is not None and form != solution.expression:
            # rounding moved the answer into another regime: show that regime's form
            solution.expression, solution.relaxed = form, None
