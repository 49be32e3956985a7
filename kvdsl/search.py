"""Numeric search for the answer of a condition, on the exact rules: no SymPy.

`eval` solves `?` cells here, so it never imports SymPy; `solve` adds the
closed form and its regimes.  An integer cell's condition need not be
monotone (a batch may serve too few users below a window and miss the
time per token above it): every integer up to DENSE is tried at once with
NumPy, and each boundary that decides the answer is settled exactly.
"""

from __future__ import annotations

from fractions import Fraction
from dataclasses import dataclass
from typing import Optional

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



# ---- every window of integers where a condition holds -------------------------

DENSE = 65_536  # every integer from 1 to DENSE is tried (vectorized, in one pass)
SETTLE = 64  # the most steps an exact boundary lies from the one floats put it at
REFINED = 64  # windows whose ends are checked exactly (the answer's always is)


@dataclass
class Windows:
    """Where a condition holds on the integers n >= 1, and the answer a user means.

    `spans` are (low, high) pairs, `high` None when the condition holds up to
    SEARCH_LIMIT.  `direction` says which end answers: "max", the largest value
    that holds (a cell that uses memory as it grows: batch, context), or "min",
    the smallest (a cell that adds capacity: gpus, replicas).  With no window,
    `nearest` is the value that comes closest (the most parts of the condition
    hold there).
    """

    spans: list
    direction: str
    nearest: Optional[int] = None

    @property
    def value(self) -> Optional[int]:
        """The documented end: the top of the last window ("max"), the bottom of the first ("min")."""
        if not self.spans:
            return None
        if self.direction == "min":
            return self.spans[0][0]
        return self.spans[-1][1]  # None when the last window has no end

    def to_json(self) -> list:
        return [[low, high] for low, high in self.spans]


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


def integer_windows(feasible: Feasibility, direction_cell: Optional[Key] = None, limit: int = SEARCH_LIMIT) -> Windows:
    """Every window of integers 1..limit where `feasible` holds.

    Every integer up to DENSE is tried; past it, values in doubling steps, a
    boundary between two of them found by bisection.  Every boundary that
    decides the answer is settled on the exact rules.  `direction_cell` (the
    block's `fits`) tells which end answers: see Windows.
    """
    import numpy as np

    vector = VectorFeasibility(feasible, (direction_cell,) if direction_cell else ())
    top = min(DENSE, limit)
    xs = np.arange(1, top + 1, dtype=float)
    tail = []
    while (tail[-1] if tail else top) < limit:
        tail.append(min((tail[-1] if tail else top) * 2, limit))
    points = np.concatenate([xs, np.asarray(tail, dtype=float)])
    values = vector.values(points)
    held = vector.holds(values, len(points))
    spans = _spans(feasible, [int(p) for p in points], held, top)
    spans = _settled(feasible, spans, limit)
    direction = _direction(vector, values, direction_cell, points, spans)
    windows = Windows(spans, direction)
    if not spans:
        windows.nearest = _nearest(feasible, vector, values, xs, direction)
    return windows


def _spans(feasible, points: list, held, dense: int) -> list:
    """[low, high] runs of held points; past `dense`, where a run starts or ends is bisected between two points."""
    spans, low, previous = [], None, None
    for x, h in zip(points, held):
        if h and low is None:
            low = x if previous is None or x - previous == 1 else _change(feasible, previous, x)
        elif not h and low is not None:
            spans.append([low, previous if x - previous == 1 else _change(feasible, previous, x) - 1])
            low = None
        previous = x
    if low is not None:
        spans.append([low, None])
    return spans


def _change(feasible, before: int, after: int) -> int:
    """The first value past `before` where the exact condition differs from its value there (`after` if none does)."""
    side = feasible(before)
    if feasible(after) == side:
        return after
    while after - before > 1:
        mid = (before + after) // 2
        if feasible(mid) == side:
            before = mid
        else:
            after = mid
    return after


def _settled(feasible, spans: list, limit: int) -> list:
    """The windows with their ends checked on the exact rules (at most REFINED of them, the first and last always)."""
    chosen = set(range(len(spans))) if len(spans) <= REFINED else {0, len(spans) - 1}
    out = []
    for i, (low, high) in enumerate(spans):
        if i in chosen:
            settled = _settle(feasible, low, high, limit)
            if settled is None:
                continue
            low, high = settled
        if out and high is not None and out[-1][1] is not None and low <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], high)
        elif out and out[-1][1] is None:
            continue
        else:
            out.append([low, high])
    return [tuple(span) for span in out]


def _settle(feasible, low: int, high: Optional[int], limit: int) -> Optional[tuple]:
    """One window's exact ends, near the ones floats gave; None when the window is not there exactly."""
    steps = 0
    while not feasible(low):
        low += 1
        steps += 1
        if steps > SETTLE or (high is not None and low > high):
            return None
    steps = 0
    while low > 1 and steps < SETTLE and feasible(low - 1):
        low -= 1
        steps += 1
    if high is None:
        return (low, None) if feasible(limit) else (low, _last_good(feasible, low, limit))
    steps = 0
    while not feasible(high):
        high -= 1
        steps += 1
        if steps > SETTLE or high < low:
            return None
    steps = 0
    while high < limit and steps < SETTLE and feasible(high + 1):
        high += 1
        steps += 1
    return low, high


def _last_good(feasible, good: int, bad: int) -> int:
    while bad - good > 1:
        mid = (good + bad) // 2
        if feasible(mid):
            good = mid
        else:
            bad = mid
    return good


def _direction(vector, values: dict, direction_cell, points, spans: list) -> str:
    """"max" when the value uses up what `fits` compares (batch, context), "min" when it adds to it (gpus).

    Each comparison `fits` makes that depends on the value leaves a margin
    (the room a `<=` leaves): when it is largest at the smallest value, more
    of the value costs room ("max"); when a larger value leaves more, it adds
    room ("min").  With no such comparison, an unbounded last window means "min".
    """
    import numpy as np

    from .vector import vector_value

    if direction_cell is not None and direction_cell in vector.order:
        trend = 0
        with np.errstate(all="ignore"):
            for margin, _ in _margins(vector.feasible.program, direction_cell, set(vector.order)):
                array = np.broadcast_to(np.asarray(vector_value(margin, values), dtype=float), (len(points),))
                finite = array[np.isfinite(array)]
                if len(finite) > 1 and finite.max() > finite.min():
                    trend += 1 if finite.max() > finite[0] else -1  # the room is largest at the smallest value: it costs
        if trend:
            return "max" if trend < 0 else "min"
    return "min" if spans and spans[-1][1] is None else "max"


def _margins(program: Program, key: Key, varying: set, depth: int = 0) -> list:
    """For each `<`, `<=`, `>`, `>=` a condition makes on varying cells (following the conditions it reads):
    (the room it leaves, the bound it is measured against)."""
    from . import model as m
    from .program import CellRef
    from .program import decided_text

    out = []

    def walk(expr, depth):
        if depth > 12:
            return
        if isinstance(expr, CellRef):
            if expr.key in varying and program.cells[expr.key].dim == "bool" and program.cells[expr.key].form == "rule":
                walk(program.cells[expr.key].expr, depth + 1)
        elif isinstance(expr, m.If):
            decided = decided_text(program, expr.cond)
            for branch in ((expr.then,) if decided else (expr.otherwise,)) if decided is not None else (expr.then, expr.otherwise):
                walk(branch, depth)
        elif isinstance(expr, m.Binary) and expr.op in ("and", "or"):
            walk(expr.left, depth)
            walk(expr.right, depth)
        elif isinstance(expr, m.Binary) and expr.op in ("<", "<=", ">", ">="):
            less = expr.op in ("<", "<=")
            bound = expr.right if less else expr.left
            out.append((m.Binary("-", bound, expr.left if less else expr.right, expr.span), bound))

    walk(program.cells[key].expr, depth)
    return out


def _nearest(feasible, vector, values: dict, xs, direction: str) -> Optional[int]:
    """The value where the most parts of the condition hold (of the integers tried one by one)."""
    import numpy as np

    from .vector import vector_value

    size = len(values[feasible.target])
    expr = feasible.program.cells[feasible.constraint].expr
    parts = list(conjuncts(expr)) if expr is not None else []
    with np.errstate(all="ignore"):
        score = sum(truth(vector_value(part, values), size).astype(int) for part in parts) if parts else np.zeros(size, int)
    score = np.asarray(score)[: len(xs)]
    for key in vector.requirements:
        score = score + truth(values.get(key), size)[: len(xs)].astype(int)
    if score.min() == score.max():
        return None  # every value fails the same parts: none comes nearer than another
    best = np.flatnonzero(score == score.max())
    # among those, where the comparisons that fail miss by the least, each as a share of its bound
    # (TPOT 52.5 ms against 50 beats 276.6 ms; 30 of 40 sequences beat 14 of 40)
    missed = np.zeros(len(xs))
    with np.errstate(all="ignore"):
        for margin, bound in _margins(feasible.program, feasible.constraint, set(vector.order)):
            room = np.broadcast_to(np.asarray(vector_value(margin, values), dtype=float), (size,))[: len(xs)]
            scale = np.abs(np.broadcast_to(np.asarray(vector_value(bound, values), dtype=float), (size,))[: len(xs)])
            share = np.where(room < 0, -room / np.where(scale > 0, scale, 1), 0)
            missed = missed + np.where(np.isfinite(share), share, 0)
    best = best[missed[best] == missed[best].min()]
    index = best[-1] if direction == "max" else best[0]
    return int(xs[index])


def conjuncts(expr):
    """The parts of an expression joined by `and`, in order."""
    from . import model as m

    if isinstance(expr, m.Binary) and expr.op == "and":
        yield from conjuncts(expr.left)
        yield from conjuncts(expr.right)
    else:
        yield expr


# ---- the answer to a `?` ------------------------------------------------------

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


@dataclass
class Answer:
    """The value a search gives a cell: the documented end of the condition's windows."""

    value: Optional[Fraction]
    verified: bool
    direction: str
    constraint: str
    windows: Optional[Windows] = None  # integer cells only


def search_answer(program: Program, block: str, cell: str, base: dict, constraint: Optional[str] = None) -> Answer:
    """The answer to `block.cell = ?` on the exact rules, without SymPy.

    An integer cell gets every window where the condition holds (see
    integer_windows); any other number the boundary found by bisection.
    """
    target = (block, cell)
    constraint = constraint or constraint_for(program, block, cell, base)
    feasible = Feasibility(program, base, target, (block, constraint))
    direction_cell = (block, CONSTRAINT) if (block, CONSTRAINT) in program.cells else None
    if integer_quantity(program, target, base):
        windows = integer_windows(feasible, direction_cell)
        value = windows.value
        if value is None:
            return Answer(None, False, windows.direction, constraint, windows)
        step = 1 if windows.direction == "max" else -1
        verified = feasible(value) and (value + step < 1 or not feasible(value + step))
        return Answer(Fraction(value), verified, windows.direction, constraint, windows)
    value, direction = real_search(feasible)
    return Answer(None if value is None else Fraction(value), value is not None, direction, constraint)
