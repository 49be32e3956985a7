"""A condition on one cell, on the exact rules (no SymPy): evaluated at one value, or over arrays of them.

`eval` solves `?` cells with it, so it never imports SymPy; `solve` adds the
closed form and its regimes.  Every window of integers where a condition
holds, and the answer to a `?`, are `kvdsl/windows.py`; a real number's
boundary is found here by bisection (`real_search`).
"""

from __future__ import annotations

from fractions import Fraction

from .errors import KvdslError, UsageError, did_you_mean
from .evaluate import _Unknown, evaluate_expr
from .graph import Key, Program
from .units import TOKENS, Dim

SEARCH_LIMIT = 10**15


def depends_on(program: Program, target: Key) -> set:
    """Every cell whose value depends on `target` (including target itself)."""
    return set(program.dependents(target))


class Feasibility:
    """A condition on one cell, evaluated exactly: the constraint and every requirement it could break.

    Re-evaluates only the cells that depend on the unknown and that the
    condition reads.  `holds(values)` is the constraint and the block's
    requirements together (a requirement of an engine the deployment does
    not run does not count).
    """

    def __init__(self, program: Program, base: dict, target: Key, constraint: Key):
        self.program = program
        self.base = base
        self.target = target
        self.constraint = constraint
        affected = depends_on(program, target)
        self.requirements = [k for k in program.in_order(affected) if program.cells[k].form == "require"]
        wanted = ancestors(program, [constraint] + self.requirements, affected)
        self.order = [k for k in program.in_order(wanted) if k != target
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

    def holds(self, values: dict) -> bool:
        """The constraint holds and no requirement is broken."""
        return bool(values.get(self.constraint)) and not any(self._broken(values, key) for key in self.requirements)

    def _broken(self, values: dict, key: Key) -> bool:
        if values.get(key) is not False:
            return values.get(key) is None
        scope = self.program.cells[key].scope
        return scope is None or values.get((key[0], "engine")) == scope

    def __call__(self, x) -> bool:
        return self.holds(self.values(x))


def ancestors(program: Program, keys, within: set) -> set:
    """The cells of `within` that `keys` read, directly or through others (`keys` included)."""
    out, todo = set(), list(keys)
    while todo:
        key = todo.pop()
        if key in out or key not in within:
            continue
        out.add(key)
        todo.extend(program.dependencies(key))
    return out


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


# ---- the condition over arrays of values ------------------------------------

class VectorFeasibility:
    """The same condition as a Feasibility, over an array of values at once (NumPy floats).

    Floats may misplace a boundary by a step or two where it falls between
    two integers; callers settle every boundary they report on the exact rules.
    """

    def __init__(self, feasible: Feasibility, also: tuple = ()):
        program, base, target = feasible.program, feasible.base, feasible.target
        self.feasible = feasible
        affected = depends_on(program, target)
        self.also = [k for k in also if k in affected]
        wanted = ancestors(program, [feasible.constraint, *feasible.requirements, *self.also], affected)
        self.order = [k for k in program.in_order(wanted) if k != target
                      and program.cells[k].form in ("rule", "input", "require")]
        engine = base.get((target[0], "engine"))
        self.requirements = [k for k in feasible.requirements
                             if program.cells[k].scope is None or program.cells[k].scope == engine]

    def values(self, xs) -> dict:
        import numpy as np

        from .vector import vector_value

        values = dict(self.feasible.base)
        values[self.feasible.target] = xs
        program = self.feasible.program
        with np.errstate(all="ignore"):
            for key in self.order:
                values[key] = vector_value(program.cells[key].expr, values)
        return values

    def holds(self, values: dict, size: int):
        held = truth(values.get(self.feasible.constraint), size)
        for key in self.requirements:
            held = held & truth(values.get(key), size)
        return held

    def __call__(self, xs):
        return self.holds(self.values(xs), len(xs))


def truth(value, size: int):
    """A condition's values as a bool array of `size` (unknown or not a number: false)."""
    import numpy as np

    if value is None:
        return np.zeros(size, dtype=bool)
    array = np.asarray(value)
    if array.dtype != bool:
        array = np.asarray(value, dtype=float)
        array = np.where(np.isnan(array), False, array != 0)
    return np.broadcast_to(array, (size,)).copy()


# ---- the condition a `?` is solved against -----------------------------------

CONSTRAINT = "fits"
TARGETS = "meets_targets"  # fits, and serves the deployment's workload within its targets


def asks_targets(program: Program, block: str, base: dict) -> bool:
    """True when the block's workload asks for something (its `asks`: more than one user or a latency target)."""
    if (block, TARGETS) not in program.cells or (block, "workload") not in program.cells:
        return False
    return base.get((base.get((block, "workload")), "asks")) is True


def constraint_for(program: Program, block: str, cell: str, base: dict) -> str:
    """The condition a `?` is solved against: the workload's targets when it asks and they depend on the cell, else `fits`."""
    if asks_targets(program, block, base) and (block, TARGETS) in depends_on(program, (block, cell)):
        return TARGETS
    return CONSTRAINT
