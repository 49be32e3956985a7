"""Every window of integers where a condition on one cell holds, and the answer to a `?` in it.

An integer cell's condition need not be monotone (a batch may serve too few
users below a window and miss the time per token above it): every integer up
to DENSE, and doubling steps past it, are tried.  Ranges of them are first
settled at once by bounds on the exact rules (`kvdsl/intervals.py`): where
the bounds decide the condition, every point of the range holds or fails, and
a boundary between two ranges is found on the exact rules by bisection.
When the bounds leave too much open, every point is evaluated at once with
NumPy, in floats, and each boundary that decides the answer is settled exactly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from .graph import Key, Program
from .range_search import RangeSearch, Undecided, first_change
from .search import (CONSTRAINT, SEARCH_LIMIT, Feasibility, VectorFeasibility, constraint_for, integer_quantity,
                     real_search, truth)

DENSE = 65_536  # every integer from 1 to DENSE is tried (by ranges, else all at once with NumPy)
SETTLE = 64  # the most steps an exact boundary lies from the one NumPy's floats put it at
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


def integer_windows(feasible: Feasibility, direction_cell: Optional[Key] = None, limit: int = SEARCH_LIMIT,
                    near=None) -> Windows:
    """Every window of integers 1..limit where `feasible` holds.

    Every integer up to DENSE is tried; past it, values in doubling steps, a
    boundary between two of them found by bisection.  Every boundary that
    decides the answer is exact.  `direction_cell` (the block's `fits`) tells
    which end answers: see Windows.  `near`: where a boundary is expected.
    """
    vector = VectorFeasibility(feasible, (direction_cell,) if direction_cell else ())
    points = _Points(limit)
    try:
        windows = _bounded_windows(feasible, vector, direction_cell, points, near)
    except Undecided:
        windows = None
    return windows or _vector_windows(feasible, vector, direction_cell, points, limit)


class _Points:
    """The values tried, in order: every integer from 1 to DENSE, then doubling steps up to the limit."""

    def __init__(self, limit: int):
        self.dense = min(DENSE, limit)
        self.tail: list = []
        while (self.tail[-1] if self.tail else self.dense) < limit:
            self.tail.append(min((self.tail[-1] if self.tail else self.dense) * 2, limit))

    def __len__(self) -> int:
        return self.dense + len(self.tail)

    def __getitem__(self, index: int) -> int:
        return index + 1 if index < self.dense else self.tail[index - self.dense]


def _bounded_windows(feasible: Feasibility, vector, direction_cell, points: _Points, near=None) -> Optional[Windows]:
    """The windows, exact at every point, from bounds over ranges of points (`kvdsl/range_search.py`); None
    when there is none (the nearest miss is scored over every point).  Raises Undecided past its budget."""
    search = RangeSearch(feasible, vector.order, points, near)
    spans = [tuple(span) for span in _spans(search.change, points, search.runs())]
    if not spans:
        return None
    trend = 0
    if direction_cell is not None and direction_cell in vector.order:
        margins = _margins(feasible.program, direction_cell, set(vector.order))
        trend = sum(search.trend(margin) for margin, _ in margins)
    return Windows(spans, _direction(trend, spans))


def _vector_windows(feasible: Feasibility, vector, direction_cell, points: _Points, limit: int) -> Windows:
    """The windows from every point evaluated at once in floats, their ends settled on the exact rules."""
    import numpy as np

    xs = np.arange(1, points.dense + 1, dtype=float)
    floats = np.concatenate([xs, np.asarray(points.tail, dtype=float)])
    values = vector.values(floats)
    held = vector.holds(values, len(floats))
    changes = np.flatnonzero(held[1:] != held[:-1]) + 1
    runs = [(int(first), int(last), bool(held[first]))
            for first, last in zip([0, *changes], [*(changes - 1), len(floats) - 1])]
    spans = _settled(feasible, _spans(functools.partial(first_change, feasible), points, runs), limit)
    windows = Windows(spans, _direction(_vector_trend(vector, values, direction_cell, floats), spans))
    if not spans:
        windows.nearest = _nearest(feasible, vector, values, xs, windows.direction)
    return windows


def _spans(change, points: _Points, runs: list) -> list:
    """[low, high] of the runs of points that hold; past the dense points, where a run starts or ends is
    found between two points by `change` (see `first_change`).  `runs`: (first index, last index, holds), in order."""
    spans, low = [], None
    for first, _, held in runs:
        x = points[first]
        previous = points[first - 1] if first else None
        if held and low is None:
            low = x if previous is None or x - previous == 1 else change(previous, x)
        elif not held and low is not None:
            spans.append([low, previous if x - previous == 1 else change(previous, x) - 1])
            low = None
    if low is not None:
        spans.append([low, None])
    return spans


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


def _direction(trend: int, spans: list) -> str:
    """"max" when the value uses up what `fits` compares (batch, context), "min" when it adds to it (gpus).

    Each comparison `fits` makes that depends on the value leaves a margin
    (the room a `<=` leaves): when it is largest at the smallest value, more
    of the value costs room ("max"); when a larger value leaves more, it adds
    room ("min").  `trend` counts the margins of each kind, the second as
    positive.  With no such comparison, an unbounded last window means "min".
    """
    if trend:
        return "max" if trend < 0 else "min"
    return "min" if spans and spans[-1][1] is None else "max"


def _vector_trend(vector, values: dict, direction_cell, points) -> int:
    """The margins that grow with the value less those that shrink (see `_direction`), over float arrays."""
    import numpy as np

    from .vector import vector_value

    trend = 0
    if direction_cell is not None and direction_cell in vector.order:
        with np.errstate(all="ignore"):
            for margin, _ in _margins(vector.feasible.program, direction_cell, set(vector.order)):
                array = np.broadcast_to(np.asarray(vector_value(margin, values), dtype=float), (len(points),))
                finite = array[np.isfinite(array)]
                if len(finite) > 1 and finite.max() > finite.min():
                    trend += 1 if finite.max() > finite[0] else -1  # the room is largest at the smallest value: it costs
    return trend


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

    from . import model as m
    from .vector import vector_value

    size = len(values[feasible.target])
    expr = feasible.program.cells[feasible.constraint].expr
    parts = list(m.conjuncts(expr)) if expr is not None else []
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




# ---- the answer to a `?` ------------------------------------------------------


@dataclass
class Answer:
    """The value a search gives a cell: the documented end of the condition's windows."""

    value: Optional[Fraction]
    verified: bool
    direction: str
    constraint: str
    windows: Optional[Windows] = None  # integer cells only


def search_answer(program: Program, block: str, cell: str, base: dict, constraint: Optional[str] = None,
                  near=None) -> Answer:
    """The answer to `block.cell = ?` on the exact rules, without SymPy.

    An integer cell gets every window where the condition holds (see
    integer_windows; `near`: where the answer is expected); any other number
    the boundary found by bisection.
    """
    target = (block, cell)
    constraint = constraint or constraint_for(program, block, cell, base)
    feasible = Feasibility(program, base, target, (block, constraint))
    direction_cell = (block, CONSTRAINT) if (block, CONSTRAINT) in program.cells else None
    if integer_quantity(program, target, base):
        windows = integer_windows(feasible, direction_cell, near=near)
        value = windows.value
        if value is None:
            return Answer(None, False, windows.direction, constraint, windows)
        step = 1 if windows.direction == "max" else -1
        verified = feasible(value) and (value + step < 1 or not feasible(value + step))
        return Answer(Fraction(value), verified, windows.direction, constraint, windows)
    value, direction = real_search(feasible)
    return Answer(None if value is None else Fraction(value), value is not None, direction, constraint)
