"""Where a condition on one cell holds among many values, a range of them at a time.

The answer search (`kvdsl/windows.py`) tries every integer from 1 to 65,536
and doubling steps past it.  A range of those values whose bounds
(`kvdsl/intervals.py`) decide the condition is settled at once; where the
bounds leave it open, the change between the range's ends is bisected on the
exact rules, and each side settled by its own bounds.  A condition the bounds
cannot settle (one on divisibility, say) gives up early: the points are then
evaluated all at once with NumPy.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

from .evaluate import NONE, evaluate_expr
from .intervals import EVERYWHERE, IntervalEvaluator, bounds_of, range_holds, range_values

# the rules a search evaluates before it gives the bounds up: a value costs each rule of the condition
# once, a range of values three times (a search of 62 rules settles `fits` in about 1,000)
BUDGET = 3_500
RANGE_COST = 3


def first_change(holds, before: int, after: int) -> int:
    """The first value past `before` where `holds` differs from its value there, bisected between the two
    (`after` if it does not differ there)."""
    side = holds(before)
    if holds(after) == side:
        return after
    while after - before > 1:
        middle = (before + after) // 2
        if holds(middle) == side:
            before = middle
        else:
            after = middle
    return after


class Undecided(Exception):
    """The bounds left too much open: the search would evaluate more than BUDGET rules."""


class RangeSearch:
    """Where a condition (`search.Feasibility`) holds among sorted integer `points`, a range at a time.

    A range of points whose bounds decide the condition is settled at once.
    Where they leave it open and the condition differs at the range's two
    ends, the change between them is bisected on the exact rules and each side
    is then settled by its own bounds; otherwise the range is split in two.
    Calling the search with a value tells, exactly, whether it holds there.
    `near`, where the answer is expected (a closed form's value), is tried
    first when a change is bisected.
    """

    def __init__(self, feasible, order: list, points, near=None):
        self.feasible, self.order, self.points = feasible, order, points
        self._near = None if near is None else bisect.bisect_right(points, near) - 1  # the point at or below it
        self._held: dict = {}  # value -> whether the condition holds there
        self._exact: dict = {}  # value -> every cell's value there
        self._ranges: dict = {}  # (low, high) -> the bounds of every cell over the values low..high
        self._left = BUDGET

    def __call__(self, x) -> bool:
        held = self._held.get(x)
        if held is None:
            held = self._held[x] = self.feasible.holds(self._values_at(x))
        return held

    def runs(self) -> list:
        """(first index, last index, holds) of each run of points where the condition holds, or fails, throughout."""
        found: list = []
        self._runs(0, len(self.points) - 1, found)
        runs: list = []
        for first, last, held in found:
            if runs and runs[-1][2] == held:
                first = runs.pop()[0]
            runs.append((first, last, held))
        return runs

    def change(self, before: int, after: int) -> int:
        """The first value past `before` where the condition is not what it is there (`after` if none is),
        as `first_change` bisects it, the values between settled by their bounds where they can be."""
        side = self(before)
        if self(after) == side:
            return after
        if after - before > 2:
            between = range_holds(self.feasible, self._range(before + 1, after - 1))
            if between is not None:
                return after if between == side else before + 1
        return first_change(self, before, after)

    def trend(self, margin) -> int:
        """1 when `margin` is larger at some point than at the first where it is a number, -1 when it is
        only smaller elsewhere, 0 when it is the same at every point."""
        first, last = 0, len(self.points) - 1
        start = self._number_at(margin, first)
        while start is None and first < last:
            first += 1
            start = self._number_at(margin, first)
        if start is None:
            return 0
        # the first point is neither above nor below where it starts: its range is the one `runs` bounded
        if self._somewhere(margin, first, last, start, above=True):
            return 1
        return -1 if self._somewhere(margin, first, last, start, above=False) else 0

    def _runs(self, first: int, last: int, found: list) -> None:
        verdict = self._over(first, last)
        if verdict is not None:
            found.append((first, last, verdict))
            return
        start, end = self(self.points[first]), self(self.points[last])
        if start == end:
            self._pilot(first)
            middle = (first + last) // 2
            self._runs(first, middle, found)
            self._runs(middle + 1, last, found)
            return
        change = self._near_change(first, last, start)
        if change is None:
            self._pilot(first)
            change = self._change(first, last, start)
        for low, high, held in ((first, change - 1, start), (change, last, end)):
            if self._over(low, high) == held:
                found.append((low, high, held))
            else:
                self._pilot(low)
                self._runs(low, high, found)

    def _pilot(self, first: int) -> None:
        """Undecided when the bounds cannot settle the point `first` and the next, where the condition is the
        same: they would split range after range down to its points (a condition on divisibility, say)."""
        if self._over(first, first + 1) is None and self(self.points[first]) == self(self.points[first + 1]):
            raise Undecided

    def _over(self, first: int, last: int):
        """True or False when the condition holds, or fails, at every point first..last; None when open."""
        if first == last:
            return self(self.points[first])
        return range_holds(self.feasible, self._bounds(first, last))

    def _near_change(self, first: int, last: int, start: bool):
        """The index past `first` where the condition stops being `start`, when it is next to `near`; else None."""
        if self._near is not None:
            for at in (self._near, self._near - 1):
                if first <= at < last and self(self.points[at]) == start and self(self.points[at + 1]) != start:
                    return at + 1
        return None

    def _change(self, first: int, last: int, start: bool) -> int:
        """The index past `first` where the condition stops being `start`, bisected (it is not `start` at `last`)."""
        while last - first > 1:
            middle = (first + last) // 2
            if self(self.points[middle]) == start:
                first = middle
            else:
                last = middle
        return last

    def _somewhere(self, margin, first: int, last: int, start, above: bool) -> bool:
        """Whether `margin` is above (else below) `start` at some point first..last where it is a number."""
        if first > last:
            return False
        if first == last:
            value = self._number_at(margin, first)
            return value is not None and (value > start if above else value < start)
        try:
            value = IntervalEvaluator(self._bounds(first, last)).visit(margin)
        except EVERYWHERE:  # a number at no point
            return False
        span = bounds_of(value)
        if span is not None:
            low, high = span[0], span[1]
            if (high <= start) if above else (low >= start):
                return False
            if (low > start) if above else (high < start):
                return True
        elif value is NONE:
            return False
        for end in (first, last):  # a margin that only grows or shrinks goes furthest at an end
            value = self._number_at(margin, end)
            if value is not None and (value > start if above else value < start):
                return True
        middle = (first + last) // 2
        return (self._somewhere(margin, first, middle, start, above)
                or self._somewhere(margin, middle + 1, last, start, above))

    def _number_at(self, margin, index: int):
        """The exact value of `margin` at the point `index`, when it is a finite number; else None."""
        try:
            value = evaluate_expr(margin, self._values_at(self.points[index]))
        except EVERYWHERE:
            return None
        if not isinstance(value, (Fraction, int)):
            return None
        try:
            return value if math.isfinite(float(value)) else None
        except OverflowError:
            return None

    def _values_at(self, x) -> dict:
        values = self._exact.get(x)
        if values is None:
            self._spend(1)
            values = self._exact[x] = self.feasible.values(x)
        return values

    def _bounds(self, first: int, last: int) -> dict:
        return self._range(self.points[first], self.points[last])

    def _range(self, low: int, high: int) -> dict:
        values = self._ranges.get((low, high))
        if values is None:
            self._spend(RANGE_COST)
            values = self._ranges[(low, high)] = range_values(self.feasible, self.order, low, high)
        return values

    def _spend(self, times: int) -> None:
        self._left -= times * len(self.order)
        if self._left < 0:
            raise Undecided
