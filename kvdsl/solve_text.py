"""What `solve` says: why a cell has no answer, and the answer drawn for a reader.

`render` prints a `Solution` (the closed form, the number, the windows it
holds in, its regimes); `why_not`, `nearest_text` and `no_target_answer`
word the messages of an answer not found, each with the verdict where the
condition comes closest.  The words of a verdict are the prelude's.
"""

from __future__ import annotations

from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

import sympy as sp
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.stringpict import prettyForm

from .display import format_value, gib_text
from .graph import Key, Program
from .search import CONSTRAINT, TARGETS, Feasibility
from .solve_algebra import relations, stand_in

if TYPE_CHECKING:
    from .solve import Solution


def no_target_answer(program: Program, block: str, cell: str, base: dict, found) -> str:
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


def why_not(program: Program, block: str, cell: str, base: dict, constraint, x, env, found) -> str:
    """Why no value of `cell` satisfies the condition: the weights, a relation false whatever it is, or the nearest miss."""
    shortfall = base.get((block, "shortfall_bytes_per_gpu"))
    if shortfall is not None and shortfall > 0:
        return f"no `{cell}` fits: the weights alone exceed the usable memory of each GPU by {gib_text(shortfall)}"
    for relation in relations(constraint):
        if isinstance(relation, sp.core.relational.Relational) and not relation.has(x) and relation.subs(env) is sp.false:
            return f"`{CONSTRAINT}` fails whatever `{cell}` is: `{sp.sstr(relation)}` is false"
    feasible = Feasibility(program, base, (block, cell), (block, CONSTRAINT))
    if all(feasible(n) for n in (1, 1000, 10**9)):
        return f"`{CONSTRAINT}` holds for every `{cell}` tried (1, 1,000, 10^9): nothing bounds it"
    return f"no positive `{cell}` satisfies `{CONSTRAINT}`" + nearest_text(program, base, (block, cell), found)


def nearest_text(program: Program, base: dict, target: Key, found) -> str:
    """`; nearest, at CELL N: VERDICT` where the search came closest, or nothing."""
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
    with stand_in("sympy.physics.units", "Quantity"):
        yield


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
