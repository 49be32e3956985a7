"""Bounds over a range of values hold every value the exact rules take there, and the windows the answer
search settles by them are those it finds point by point."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import pytest

from kvdsl.api import build_program
from kvdsl.errors import KvdslError
from kvdsl.evaluate import evaluate
from kvdsl.functions import FUNCTIONS
from kvdsl.intervals import ANY, MAYBE, Bounds, range_values
from kvdsl.range_search import RangeSearch, Undecided
from kvdsl.search import SEARCH_LIMIT, Feasibility, VectorFeasibility, depends_on
from kvdsl.windows import _bounded_windows, _Points, _vector_windows

ROOT = Path(__file__).resolve().parents[1]
CATALOG = str(ROOT / "specs" / "catalog.kvspec")
DEPLOYMENTS = ["gpt_oss_120b_h100", "llama_3_1_70b_h100x4_fp8", "mamba_2_8b_l4", "jamba_a100x2",
               "llama_3_1_70b_h200_disagg", "qwen3_8b_rtx4090"]


@pytest.fixture(scope="module")
def catalog():
    program = build_program([CATALOG])
    return program, evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))


def feasibility(catalog, block: str, cell: str) -> Feasibility:
    program, base = catalog
    return Feasibility(program, base, (block, cell), (block, "fits"))


def holds(bound, value) -> bool:
    """Is the exact value `value` (None: not computed) within `bound`?"""
    if bound is ANY:
        return True
    if bound is MAYBE:
        return isinstance(value, bool)
    if isinstance(bound, Bounds):
        return value is not None and not isinstance(value, bool) and bound.lo <= value <= bound.hi
    return value == bound if bound is not None else value is None


def test_every_function_bound_holds_its_values():
    ranges = [(Fraction(-7, 2), Fraction(-1, 3), False), (Fraction(-2), Fraction(5), True),
              (Fraction(-9), Fraction(2), True), (Fraction(1, 4), Fraction(9, 2), False), (Fraction(3), Fraction(40), True)]
    for function in (f for f in FUNCTIONS.values() if f.bounds is not None):
        for args in itertools.product(ranges, repeat=function.min_args):
            found = function.bounds(list(args))
            points = [[low, (low + high) / 2, high] + ([Fraction(round(low + high) // 2)] if whole else [])
                      for low, high, whole in args]
            for values in itertools.product(*points):
                if any(whole and v.denominator != 1 for v, (_, _, whole) in zip(values, args)):
                    continue
                try:
                    exact = function.exact(list(values))
                except (ValueError, ArithmeticError):
                    continue
                if isinstance(found, tuple):
                    assert found[0] <= exact <= found[1] and (not found[2] or Fraction(exact).denominator == 1), \
                        (function.name, args, values)
                elif found is not None:  # a condition decided over the ranges
                    assert exact == found, (function.name, args, values)


RULES = """import "{root}/specs/models/llama_3_1_70b.kvspec"
import "{root}/specs/hardware/h100_sxm.kvspec"

deployment d "Rules of every kind, each reading the context" {{
    model = llama_3_1_70b
    hardware = h100_sxm
    context = 8K
    batch = 4
    let room = 100000 tokens - context
    let share = context / (context + 1 tokens)
    let capped = min(context, 4096 tokens) * 3 + max(context, 100 tokens)
    let branch = if context > 5000 tokens then context - 5000 tokens else 5000 tokens - context
    let pages = ceil(context / 16 tokens) - floor(context / 48 tokens)
    let negated = -context
    let apart = abs(3000 tokens - context)
    let inverse = 1000 tokens / (context - 3000 tokens)
    let even = whole(context / 2 tokens)
    let far = room > 50000 tokens or not (pages <= 100)
    let both = even and capped < 10000 tokens
    let truncated = float_int(context / 1 tokens, 3, 7)
}}
"""


def test_the_bounds_of_each_operation_hold_its_values(tmp_path):
    path = tmp_path / "rules.kvspec"
    path.write_text(RULES.format(root=ROOT))
    program = build_program([str(path)])
    base = evaluate(program)
    feasible = Feasibility(program, base, ("d", "context"), ("d", "fits"))
    order = [k for k in program.order if k[0] == "d" and k in depends_on(program, ("d", "context"))
             and program.cells[k].cell.new]
    assert len(order) == 12
    for low, high in [(1, 2), (2000, 4000), (2999, 3001), (5000, 90_000), (60_000, 10**9)]:
        bounds = range_values(feasible, order, low, high)
        for x in {low, low + 1, (low + high) // 2, high - 1, high}:
            exact = feasible.values(x)
            exact.update((k, _exact(program, k, exact)) for k in order)
            assert [k[1] for k in order if not holds(bounds[k], exact[k])] == [], (low, high, x)
    bounds = range_values(feasible, order, 2000, 4000)
    assert [k[1] for k in order if bounds[k] is ANY] == ["inverse", "even", "both"]  # a division by a range holding 0


def _exact(program, key, values):
    from kvdsl.evaluate import evaluate_expr

    try:
        return evaluate_expr(program.cells[key].expr, values)
    except (ArithmeticError, ValueError, KvdslError):
        return None


@pytest.mark.parametrize("block", DEPLOYMENTS[:3])
def test_the_bounds_of_every_rule_hold_its_values_at_each_point_of_the_range(catalog, block):
    feasible = feasibility(catalog, block, "context")
    order = VectorFeasibility(feasible, ((block, "fits"),)).order
    for low, high in [(1, 2), (100, 4096), (4097, 70_000), (1, 10**12)]:
        bounds = range_values(feasible, order, low, high)
        for x in (low, (low + high) // 2, high):
            exact = feasible.values(x)
            assert [k for k in order if not holds(bounds[k], exact[k])] == [], (low, high, x)


@pytest.mark.parametrize("block", DEPLOYMENTS)
@pytest.mark.parametrize("cell", ["batch", "context"])
def test_windows_settled_by_bounds_are_those_found_point_by_point(catalog, block, cell):
    feasible = feasibility(catalog, block, cell)
    vector = VectorFeasibility(feasible, ((block, "fits"),))
    points = _Points(SEARCH_LIMIT)
    by_points = _vector_windows(feasible, vector, (block, "fits"), points, SEARCH_LIMIT)
    by_bounds = _bounded_windows(feasible, vector, (block, "fits"), points)  # a memory condition: no Undecided
    assert (by_bounds.spans, by_bounds.direction) == (by_points.spans, by_points.direction)


def test_a_condition_the_bounds_cannot_settle_gives_up_early(catalog):
    """GPUs split the heads evenly: whether a count holds is a matter of divisibility, point by point."""
    feasible = feasibility(catalog, "llama_3_1_70b_h100x16", "gpus")
    search = RangeSearch(feasible, VectorFeasibility(feasible, ()).order, _Points(SEARCH_LIMIT))
    with pytest.raises(Undecided):
        search.runs()
    assert len(search._ranges) <= 4
