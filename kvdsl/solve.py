"""Symbolic what-if: solve a block's constraint (`fits`) for any one cell.

The constraint is expanded into the rules that depend on the asked-for cell,
everything else stays a symbol named as the spec names it.  Rounding
(`ceil`, `floor`) is relaxed to find the closed form; `min`, `max` and `if`
split it into regimes.  The integer answer a user means (the largest batch,
the smallest GPU count) is then found on the exact rules, rounding included,
and checked by substituting it back.
"""

from __future__ import annotations

import math
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

import sympy as sp
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.stringpict import prettyForm

from .display import format_value, gib_text
from .errors import NoLiveForm, SolveError, UsageError
from .evaluate import evaluate
from .graph import Key, Program
from .search import CONSTRAINT, TARGETS, Feasibility, constraint_for, depends_on, find_key, integer_quantity, search_answer
from .symbolic import Expander, TooLarge, to_rational
from .units import Dim



@dataclass
class Regime:
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


def _relations(expr) -> list:
    if isinstance(expr, sp.And):
        return [r for arg in expr.args for r in _relations(arg)]
    return [expr]


def _gaps(constraint, x) -> list:
    """Each relation of the constraint that involves x, as `gap <= 0`."""
    out = []
    for relation in _relations(constraint):
        if isinstance(relation, sp.core.relational.Relational) and relation.has(x):
            less = isinstance(relation, (sp.Le, sp.Lt))
            out.append(relation.lhs - relation.rhs if less else relation.rhs - relation.lhs)
    return out


def _substitute_conditions(expr, env: dict):
    """Decide the conditions of every `if` that the given values decide."""
    expr = expr.rewrite(sp.Piecewise) if expr.has(sp.Min, sp.Max) else expr

    def fix(pw):
        return sp.Piecewise(*[(a, c.subs(env) if hasattr(c, "subs") else c) for a, c in pw.args])

    return expr.replace(lambda e: isinstance(e, sp.Piecewise), fix)


def _roots(piece, x) -> list:
    """Real roots of piece = 0 in closed form, for rational functions of x; [] otherwise."""
    if not piece.is_rational_function(x):
        return []
    linear = _linear_root(piece, x)
    if linear is not None:
        return linear
    try:
        return [r for r in sp.solve(sp.Eq(piece, 0), x) if not r.has(sp.I)]
    except (NotImplementedError, ValueError, TypeError):
        return []


def _linear_root(piece, x):
    """[root] of piece = 0 when its numerator is linear in x ([] when the root zeroes the denominator); else None.

    The common case, without `sp.solve`: it simplifies its answers, and
    `simplify` alone costs more than the rest of a solve.
    """
    numerator, denominator = sp.fraction(sp.together(piece))
    try:
        poly = sp.Poly(numerator, x)
    except sp.PolynomialError:
        return None
    if poly.degree() != 1:
        return None
    slope, offset = poly.coeff_monomial(x), poly.coeff_monomial(1)
    if slope.has(x) or offset.has(x) or slope == 0:
        return None
    root = sp.cancel(-offset / slope)
    if denominator.has(x) and sp.cancel(denominator.subs(x, root)) == 0:
        return []
    return [] if root.has(sp.I) else [root]


def _group_terms(add):
    """`a*b*k + a*b*v - u` -> `a*b*(k + v) - u`: pull out what most terms share."""
    terms = [t for t in add.args if isinstance(t, sp.Mul)]
    if len(terms) < 2:
        return add
    common = sp.factor_terms(sp.Add(*terms))
    if not isinstance(common, sp.Mul):
        return add
    return common + sp.Add(*[t for t in add.args if not isinstance(t, sp.Mul)])


def _tidy(expr):
    """The shortest of a few equivalent forms of a closed form, with positive denominators."""
    numerator, denominator = sp.fraction(sp.cancel(expr))
    flipped = (-numerator) / (-denominator)
    forms = [expr, sp.factor_terms(expr), sp.factor(expr), flipped]
    forms += [f.replace(lambda e: e.is_Add, _group_terms) for f in list(forms)]
    return min(forms, key=lambda e: (sp.count_ops(e, visual=False) + str(e).count("-"), len(str(e))))


def _relax(expr):
    return expr.replace(sp.ceiling, lambda a: a).replace(sp.floor, lambda a: a)


def _pieces(expr) -> list:
    folded = sp.piecewise_fold(expr)
    if isinstance(folded, sp.Piecewise):
        return [(a, c) for a, c in folded.args if c is not sp.false]
    return [(folded, sp.true)]


def _number(value) -> Optional[float]:
    try:
        number = complex(value)
    except (TypeError, ValueError):
        return None
    if abs(number.imag) > 1e-12 or math.isnan(number.real):
        return None
    return number.real


def solve(program: Program, block: str, cell: str, symbolic=(), others: bool = True,
          unchecked: frozenset = frozenset()) -> Solution:
    """Solve `block`'s `fits` for `cell`, every other cell given.

    `?` cells of other blocks are solved first (`others`), each on its own.
    Requirements in `unchecked` are not checked on the spec's values.
    """
    # hazard: SymPy's Add.flatten imports sympy.tensor.tensor on every call,
    # only to test isinstance(term, TensExpr); no kvdsl expression is a tensor,
    # and the import costs a tenth of a solve
    with _stand_in("sympy.tensor.tensor", "TensExpr", "TensAdd"):
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
            expanded = _expand_constraint(program, block, cell, affected)
        except TooLarge:
            solution.message = "no closed form: the condition reads more rules than a formula a reader could follow"
    if expanded is not None:
        x, expander, constraint = expanded
        _check_monotone_form(constraint, x, block, cell, integer)
        env = {s: to_rational(base[k]) for s, k in expander.symbols.items() if base.get(k) is not None}
        zeros = {sym: 0 for sym, value in env.items() if value == 0 and expander.symbols[sym] not in keep}
        bounds = _bounds(constraint.subs(zeros), x, env)
        _closed_form(solution, bounds, env, x)
    if not integer and solution.expression is not None and _exact_real(solution, program, base, target):
        found = None
    else:
        found = search_answer(program, block, cell, base, solution.constraint)
        _take(solution, found, integer)
    if solution.constraint == CONSTRAINT and expanded is None:
        if solution.value is None and not (found is not None and found.windows is not None and found.windows.spans):
            solution.message = f"no `{cell}` satisfies `{CONSTRAINT}`" + _nearest_text(program, base, target, found)
    elif solution.constraint == CONSTRAINT:
        if solution.expression is None and solution.value is not None:
            solution.message = "no closed form: the answer is where a condition of the rules changes, found by search"
        if not integer:
            _check_requirements(program, solution, Feasibility(program, base, target, (block, CONSTRAINT)))
        if solution.expression is not None:
            _regimes(solution, env, x, {s for s, k in expander.symbols.items() if k in keep})
        if solution.value is None and solution.message is None:
            solution.message = _why_not(program, block, cell, base, constraint, x, env, found)
    elif solution.value is None and solution.message is None:
        solution.message = _no_target_answer(program, block, cell, base, found)
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
    exact = solution.expression.subs(solution.env)
    value = Fraction(str(exact)) if exact.is_Rational else Fraction(solution.relaxed)
    feasible = Feasibility(program, base, target, (target[0], CONSTRAINT))
    if not feasible.values(value).get(feasible.constraint):
        return False
    solution.value, solution.verified = value, True
    return True


def _no_target_answer(program: Program, block: str, cell: str, base: dict, found) -> str:
    """Why no value meets the workload's targets: the verdict where it comes closest."""
    nearest = found.windows.nearest if found.windows is not None else None
    at = nearest if nearest is not None else base.get((block, cell))
    verdict = verdict_at(program, base, (block, cell), at)
    where = f"; nearest, at {cell} {at:,}" if nearest is not None else ""
    return f"no `{cell}` meets the workload's targets{where}" + (f": {verdict}" if verdict else "")


def verdict_at(program: Program, base: dict, target: Key, value) -> Optional[str]:
    """The block's verdict sentence with `target` at `value` (None without a verdict or a value)."""
    key = (target[0], "verdict")
    if key not in program.cells or value is None:
        return None
    verdict = Feasibility(program, base, target, key).values(value).get(key)
    return verdict if isinstance(verdict, str) else None


def _condition(relation) -> str:
    if isinstance(relation, (sp.Eq, sp.Ne)):
        return f"{sp.sstr(relation.lhs)} {'==' if isinstance(relation, sp.Eq) else '!='} {sp.sstr(relation.rhs)}"
    return sp.sstr(relation)


EXPANDED_NODES = 3000  # the largest condition, every rule it reads expanded, built as a closed form


def _expand_constraint(program: Program, block: str, cell: str, affected: set):
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
    for relation in _relations(constraint):
        if relation.has(x) and not isinstance(relation, (sp.Le, sp.Lt, sp.Ge, sp.Gt)):
            raise SolveError(
                f"cannot solve `{block}.{cell}`: `{CONSTRAINT}` uses `{_condition(relation)}`; kvdsl solves conditions "
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


def _bounds(constraint, x, env: dict) -> list:
    """For each relation on x: (direction, [(condition, solution)]) of its relaxed form."""
    out = []
    for gap in _gaps(constraint, x):
        gap = _relax(_substitute_conditions(gap, env))
        regimes = []
        earlier = []
        for piece, condition in _pieces(gap):
            effective = sp.And(condition, *[sp.Not(c) for c in earlier]) if earlier else condition
            earlier.append(condition)
            condition = effective
            if not piece.has(x):
                continue
            roots = _roots(piece, x)
            if not roots:
                continue
            slope = _number(sp.diff(piece, x).subs(env).subs(x, roots[0].subs(env)))
            regimes.append((condition, _tidy(roots[0]), slope))
        if regimes:
            out.append(regimes)
    return out


def _closed_form(solution: Solution, bounds: list, env: dict, x) -> None:
    """The binding relation and regime of the relaxed constraint: the closed form shown beside the answer."""
    limits = []
    for regimes in bounds:
        active = []
        for condition, root, slope in regimes:
            value = _number(root.subs(env))
            holds = value is not None and value > 0 and bool(condition.subs(env).subs(x, value))
            if holds:
                active.append((regimes, condition, root, value, slope))
        if active:
            limits.append(min(active, key=lambda c: c[3]))
    if not limits:
        return
    slopes = [c[4] for c in limits if c[4] is not None]
    direction = "min" if slopes and all(s < 0 for s in slopes) else "max"
    binding = (min if direction == "max" else max)(limits, key=lambda c: c[3])
    solution.expression, solution.relaxed = binding[2], binding[3]
    solution.limits = [(c[2], c[3]) for c in limits if c is not binding]
    solution.env, solution.binding = env, binding


def _regimes(solution: Solution, env: dict, x, keep: set) -> None:
    """The binding relation's regimes, the one the answer falls in marked."""
    point = solution.value if solution.value is not None else solution.relaxed
    shown = {s: v for s, v in env.items() if s not in keep}
    for condition, root, _ in solution.binding[0]:
        cond = condition.subs(env)
        is_active = point is not None and bool(cond.subs(x, to_rational(Fraction(point))))
        solution.regimes.append(Regime(_condition_text(condition, shown), sp.sstr(root), is_active))
        if is_active and solution.value is not None and root != solution.expression:
            # rounding moved the answer into another regime: show that regime's form
            solution.expression, solution.relaxed = root, None


def _condition_text(condition, env) -> str:
    condition = condition.subs(env)
    if condition is sp.true:
        return "always"
    symbols = condition.free_symbols
    if len(symbols) == 1:
        condition = _one_bound(condition, next(iter(symbols)))
    return sp.sstr(condition)


def _one_bound(condition, x):
    """A condition on x alone, each of its `and`ed parts as a bound on x where one can be read."""
    if isinstance(condition, sp.And):
        return sp.And(*[_one_bound(part, x) for part in condition.args])
    bound = _linear_bound(condition, x)
    if bound is not None:
        condition = bound
    elif isinstance(condition, sp.core.relational.Relational):
        try:
            condition = sp.solve_univariate_inequality(condition, x, relational=True)
        except (NotImplementedError, ValueError, TypeError):
            pass
    return condition.subs({sp.Lt(x, sp.oo): sp.true, sp.Lt(-sp.oo, x): sp.true, sp.Lt(0, x): sp.true})


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _linear_bound(condition, x):
    """`a*x + b < 0` (or <=, >, >=) with a number a: the bound on x, as SymPy's
    solve_univariate_inequality writes it (`x < r`, `r <= x`), without its cost;
    None for any other condition."""
    if not isinstance(condition, sp.core.relational.Relational) or condition.rel_op not in _FLIPPED:
        return None
    expr = condition.lhs - condition.rhs
    if not expr.is_polynomial(x) or sp.degree(expr, x) != 1:
        return None
    a = expr.coeff(x, 1)
    if not a.is_number or not a.is_nonzero:
        return None
    root = -expr.coeff(x, 0) / a
    op = condition.rel_op if a.is_positive else _FLIPPED[condition.rel_op]
    if op in ("<", "<="):
        return sp.Rel(x, root, op)
    return sp.Rel(root, x, _FLIPPED[op])


def _why_not(program: Program, block: str, cell: str, base: dict, constraint, x, env, found) -> str:
    shortfall = base.get((block, "shortfall_bytes_per_gpu"))
    if shortfall is not None and shortfall > 0:
        return f"no `{cell}` fits: the weights alone exceed the usable memory of each GPU by {gib_text(shortfall)}"
    for relation in _relations(constraint):
        if isinstance(relation, sp.core.relational.Relational) and not relation.has(x) and relation.subs(env) is sp.false:
            return f"`{CONSTRAINT}` fails whatever `{cell}` is: `{sp.sstr(relation)}` is false"
    feasible = Feasibility(program, base, (block, cell), (block, CONSTRAINT))
    if all(feasible(n) for n in (1, 1000, 10**9)):
        return f"`{CONSTRAINT}` holds for every `{cell}` tried (1, 1,000, 10^9): nothing bounds it"
    return f"no positive `{cell}` satisfies `{CONSTRAINT}`" + _nearest_text(program, base, (block, cell), found)


def _nearest_text(program: Program, base: dict, target: Key, found) -> str:
    nearest = found.windows.nearest if found is not None and found.windows is not None else None
    if nearest is None:
        return ""
    verdict = verdict_at(program, base, target, nearest)
    return f"; nearest, at {target[1]} {nearest:,}" + (f": {verdict}" if verdict else "")


class _NamePrinter(PrettyPrinter):
    """Pretty-prints symbols by their spec names (no `_x` subscripts)."""

    def _print_Symbol(self, e, bold_name=False):
        return prettyForm(e.name)


def pretty(expr) -> str:
    """The expression drawn in Unicode, symbols by their spec names."""
    with _without_physics_units():
        return _NamePrinter({"use_unicode": True, "wrap_line": False}).doprint(expr)


@contextmanager
def _without_physics_units():
    """Let the pretty printer run without importing `sympy.physics.units`.

    hazard: SymPy's `PrettyPrinter._print_Mul` imports `sympy.physics.units`
    only to test `isinstance(arg, Quantity)`, and that import costs about as
    much as a whole solve.  No kvdsl expression holds a Quantity.
    """
    with _stand_in("sympy.physics.units", "Quantity"):
        yield


@contextmanager
def _stand_in(name: str, *classes: str):
    """While inside, an import of the module `name` (not imported yet) finds a
    stand-in whose `classes` nothing is an instance of; it is removed
    afterwards, so a real import later is untouched."""
    if name in sys.modules:
        yield
        return
    stand_in = types.ModuleType(name)
    for class_name in classes:
        setattr(stand_in, class_name, type(class_name, (), {}))
    sys.modules[name] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


def render(solution: Solution) -> str:
    """The human-readable answer: closed form, number, integer answer, regimes."""
    lines = [f"{solution.block}.{solution.cell}"]
    if solution.expression is not None and solution.value is not None:
        label = f"  {solution.cell} {'<=' if solution.direction == 'max' else '>='} "
        body = pretty(solution.expression).split("\n")
        mid = len(body) // 2
        for i, row in enumerate(body):
            lines.append(((label if i == mid else " " * len(label)) + row).rstrip())
        if solution.relaxed is not None and solution.relaxed > 0:
            lines.append(f"  = {format_value(Fraction(solution.relaxed).limit_denominator(10**6), solution.dim)} before rounding")
    for expression, value in solution.limits if solution.value is not None else ():
        lines.append(f"  also bounded by {sp.sstr(expression)} = {format_value(Fraction(value).limit_denominator(10**6), solution.dim)}, which does not bind")
    if solution.value is not None:
        what = "largest" if solution.direction == "max" else "smallest"
        other = "one more does not" if solution.direction == "max" else "one fewer does not"
        integer = isinstance(solution.value, int)
        holds = "it meets the targets" if solution.constraint == TARGETS else "it fits"
        check = (f"checked: {holds}, {other}" if integer else f"checked: {holds}") if solution.verified else "NOT verified by substitution"
        lines.append(f"  {what} {solution.cell}: {format_value(solution.value, solution.dim)}  ({check})")
    windows = solution.windows.spans if solution.windows is not None else []
    if len(windows) > 1 or (windows and windows[0][0] > 1 and windows[0][1] is not None):
        shown = ", ".join(_window_text(w) for w in windows[:WINDOWS_SHOWN])
        more = f" and {len(windows) - WINDOWS_SHOWN:,} more" if len(windows) > WINDOWS_SHOWN else ""
        lines.append(f"  holds for {solution.cell} in {shown}{more}")
    if solution.message:
        lines.append(f"  {solution.message}")
    if len(solution.regimes) > 1:
        lines.append("  regimes:")
        for r in solution.regimes:
            lines.append(f"   {'*' if r.active else ' '} when {r.condition}: {solution.cell} = {r.expression}")
        lines.append("  (* marks the regime the given values fall in)")
    return "\n".join(lines)



WINDOWS_SHOWN = 8


def _window_text(window) -> str:
    low, high = window
    if high is None:
        return f"{low:,} and up"
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def _rounding_step(gap, x):
    """B when the unknown is charged as `ceil(x / B) * B` (paging), else None."""
    for term in gap.atoms(sp.ceiling):
        coefficient = sp.cancel(term.args[0] / x)
        if not coefficient.has(x) and coefficient != 0:
            return 1 / coefficient
    return None


def live_form(program: Program, block: str, cell: str, assume_zeros: bool = False):
    """A closed form for the answer over every regime, for a workbook formula.

    Returns (expression, expander, assumed): the expression's symbols are the
    expander's, so a printer can name them.  The largest integer answer is
    the floor of the tightest bound, the smallest the ceiling of the loosest.
    With `assume_zeros`, the cells that are 0 (or false) now are fixed there,
    which drops the regimes they switch off (sliding layers in a model
    without any); `assumed` names them.
    """
    target = find_key(program, block, cell)
    solution = solve(program, block, cell)
    if solution.value is None:
        raise SolveError(f"cannot write `{block}.{cell}` as a formula: {solution.message}")
    if solution.constraint != CONSTRAINT:
        raise NoLiveForm(f"`{block}.{cell}` meets the workload's targets by search: no formula follows it")
    try:
        x, expander, constraint = _expand_constraint(program, block, cell, depends_on(program, target))
    except TooLarge as exc:
        raise NoLiveForm(exc.message) from None
    if _larger_than(constraint, LIVE_FORM_NODES):
        raise NoLiveForm(f"the closed form of `{block}.{cell}` is too large for a formula")
    if any(r.has(x) and not isinstance(r, (sp.Le, sp.Lt, sp.Ge, sp.Gt)) for r in _relations(constraint)):
        raise NoLiveForm(f"`{block}.{cell}` must also meet `==` or `!=` conditions: no formula follows them")
    assumed = []
    if assume_zeros:
        values = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))
        zeros = {}
        for symbol, key in expander.symbols.items():
            value = values.get(key)
            if key != target and (value is False or (not isinstance(value, bool) and value == 0)):
                zeros[symbol] = sp.false if value is False else 0
                assumed.append(str(symbol))
        constraint = constraint.subs(zeros)
    per_relation = []
    for gap in _gaps(constraint, x):
        step = _rounding_step(gap, x)
        gap = _relax(gap.rewrite(sp.Piecewise) if gap.has(sp.Min, sp.Max) else gap)
        branches = []
        for piece, condition in _pieces(gap):
            if not piece.has(x):
                continue
            roots = _roots(piece, x)
            if roots:
                root = _unbounded_where_zero(roots[0])
                branches.append((root, condition.subs(x, root)))
        if branches:
            branches[-1] = (branches[-1][0], sp.true)
            bound = sp.Piecewise(*branches)
            if step is not None:  # x is charged in whole blocks: the answer is a whole number of them
                rounded = sp.floor if solution.direction == "max" else sp.ceiling
                bound = rounded(bound / step) * step
            per_relation.append(bound)
    if not per_relation:
        raise SolveError(f"cannot write `{block}.{cell}` as a formula")
    combine = sp.Min if solution.direction == "max" else sp.Max
    expr = combine(*per_relation)
    if isinstance(solution.value, int):
        expr = sp.floor(expr) if solution.direction == "max" else sp.ceiling(expr)
    _check_live_form(program, block, cell, expr, expander, solution)
    return expr, expander, sorted(assumed)


LIVE_FORM_NODES = 4000  # a constraint larger than this (every engine rule expanded) is not written as a formula


def _larger_than(expr, limit: int) -> bool:
    for count, _ in enumerate(sp.preorder_traversal(expr)):
        if count > limit:
            return True
    return False


def _unbounded_where_zero(root):
    """A bound that divides by cells which may be 0 is unbounded (oo) where they are.

    hazard: past a sliding window, or in a pure state-space model, nothing
    grows with the context, so the memory bound divides by 0; a spreadsheet
    would show #DIV/0! there and spoil every MIN it feeds.
    """
    denominator = sp.fraction(root)[1]
    if not denominator.free_symbols:
        return root
    return sp.Piecewise((sp.oo, sp.Eq(denominator, 0)), (root, True))


def _check_live_form(program: Program, block: str, cell: str, expr, expander, solution: Solution) -> None:
    """A formula that would show another number than `eval` is refused, never written."""
    base = evaluate(program)
    env = {s: to_rational(base[k]) for s, k in expander.symbols.items() if base.get(k) is not None}
    try:
        value = _number(expr.subs(env))
    except (TypeError, ValueError, ArithmeticError):  # SymPy refuses to compare with zoo: a division by 0 here
        value = None
    if value is None or abs(value - float(solution.value)) > 1e-9 * max(1.0, abs(float(solution.value))):
        gives, why = (("has no number at the spec's values", "it divides by 0 there") if value is None
                      else (f"gives {value}", "rounding the formula cannot follow"))
        raise SolveError(
            f"cannot write `{block}.{cell} = ?` as a live formula: its closed form {gives}, but the exact "
            f"answer is {format_value(solution.value, solution.dim)} ({why})",
            hint=f"give `{cell}` a value in the spec, or export with --set {block}.{cell}=...")
