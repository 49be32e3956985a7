"""One registry per language fact: every back end covers every built-in function and every node.

The back ends are the interpreters of the expression tree: exact evaluation,
the NumPy sweep, bounds over a range of values (the answer search), SymPy, dimensions, the kvspec text printer (`explain`) and
the Excel printers (a cell's rule, and SymPy's closed forms).  A function
added to `kvdsl/functions.py` alone must work in `eval`, `sweep`, `solve` and
the workbook, as sqlglot's generators are checked against its expressions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy

from kvdsl import functions as f
from kvdsl.api import build_program, evaluate_paths, parse_setting
from kvdsl.dims import DimensionRules
from kvdsl.evaluate import Evaluator
from kvdsl.excel.formula import RulePrinter
from kvdsl.excel.printer import ExcelPrinter
from kvdsl.exprtext import TextPrinter
from kvdsl.functions import FUNCTIONS, Function, MixedDimensions, plain_number
from kvdsl.intervals import IntervalEvaluator
from kvdsl.symbolic import Converter
from kvdsl.vector import VectorEvaluator
from kvdsl.units import BOOL, BYTES, NUMBER, TOKENS
from kvdsl.visitor import NODES, ExprVisitor, NameMapper, missing_nodes

BACK_ENDS = [Evaluator, VectorEvaluator, IntervalEvaluator, Converter, DimensionRules, TextPrinter, RulePrinter, NameMapper]


@pytest.mark.parametrize("back_end", BACK_ENDS, ids=lambda c: c.__name__)
def test_every_back_end_has_a_method_for_every_node(back_end):
    assert missing_nodes(back_end) == []
    assert {cls for cls in NODES} == set(back_end._table)


def test_a_back_end_that_misses_a_node_is_refused_when_defined():
    with pytest.raises(TypeError, match="no visit method for"):
        class Incomplete(ExprVisitor):  # noqa: F841
            def visit_Num(self, node):
                return node


SAMPLES = [Fraction(-7, 2), Fraction(3), Fraction(5, 4)]


def _arguments(function: Function) -> list:
    count = max(function.min_args, 2 if function.variadic else function.min_args)
    if function.name == "ln":  # defined above 0 only
        return [abs(a) for a in SAMPLES[:count]]
    return SAMPLES[:count]


def _same(a, b) -> bool:
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return bool(a) == bool(b)
    return math.isclose(float(a), float(b), rel_tol=1e-12)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_has_every_form(name):
    function = FUNCTIONS[name]
    args = _arguments(function)
    exact = function.exact(args)
    if function.text:  # a number as text: `fixed(-3.5, 1)` is "-3.5", Excel's FIXED(-3.5, 1); no symbolic form
        assert function.exact([Fraction(-7, 2), Fraction(1)]) == "-3.5"
        assert function.excel(["A1", "1"]) == "FIXED(A1, 1)"
        assert np.isnan(function.numpy([np.array([1.0, 2.0])] * len(args)))
        assert function.dims([BYTES] * len(args)) == "text"
        with pytest.raises(ValueError):
            function.sympy([sympy.Integer(1)] * len(args))
        return
    symbolic = function.sympy([sympy.Rational(a.numerator, a.denominator) for a in args])
    assert _same(exact, bool(symbolic) if symbolic in (sympy.true, sympy.false)
                 else sympy.Rational(symbolic) if symbolic.is_Rational else float(symbolic))  # ln: a real, not a ratio
    vector = function.numpy([np.array([float(a)] * 3) for a in args])
    assert all(_same(exact, v) for v in np.broadcast_to(vector, (3,)))
    assert function.excel(["A1"] * len(args))
    assert function.excel_binds in (f.CALL, f.NEGATIVE, f.COMPARISON)
    if function.dims is plain_number:  # ln: a plain number in, a plain number out
        with pytest.raises(MixedDimensions):
            function.dims([BYTES])
        assert function.dims([None]) == NUMBER
        return
    assert function.dims([BYTES] * len(args)) in (BYTES, BOOL)
    assert function.dims([None] * len(args)) in (None, BOOL)
    if len(args) > 1:
        with pytest.raises(MixedDimensions):
            function.dims([BYTES, TOKENS] + [BYTES] * (len(args) - 2))


def _spec(tmp_path, name: str, args: str):
    path = tmp_path / "f.kvspec"
    path.write_text(f'model m "M" {{\n    layers = 8\n    heads = 4\n    head_dim = 8\n    params = 1e9\n'
                    f'    let a = 3\n    let y = {name}({args})\n}}\n')
    return path


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_evaluates_sweeps_and_prints(name, tmp_path):
    from kvdsl.sweep import prepare

    function = FUNCTIONS[name]
    args = ", ".join(["a / 2"] + ["a"] * (len(_arguments(function)) - 1))
    program, values = evaluate_paths([str(_spec(tmp_path, name, args))])
    exact = values[("m", "y")]
    sweep = prepare(program, "m", ["a=3:4"])
    inputs, results = sweep.run()
    rule = RulePrinter(lambda ref: ref.text).doprint(program.cells[("m", "y")].expr)
    assert rule.replace(" ", "")
    if function.text:  # text varies with `a`: sweeps report numbers only
        assert isinstance(exact, str) and "y" not in sweep.results
        return
    assert _same(exact, results[sweep.results.index("y")][0])
    symbolic = Converter(lambda ref: sympy.Symbol(ref.text)).visit(program.cells[("m", "y")].expr)
    assert ExcelPrinter().doprint(symbolic)


def _twice() -> Function:
    return Function("twice", 1, 1, exact=lambda args: 2 * args[0], sympy=lambda args: 2 * args[0],
                    numpy=lambda args: 2 * args[0], excel=lambda args: f"2*({args[0]})", summary="twice the value")


def test_a_function_added_to_the_registry_alone_works_in_eval_sweep_solve_and_the_workbook(monkeypatch, tmp_path):
    from kvdsl.excel.workbook import build_workbook
    from kvdsl.solve import solve
    from kvdsl.sweep import prepare

    monkeypatch.setitem(FUNCTIONS, "twice", _twice())
    spec = tmp_path / "twice.kvspec"
    spec.write_text(
        'model m "M" {\n    layers = 8\n    heads = 8\n    kv_heads = 8\n    head_dim = 128\n    params = 1e9\n'
        '    context_limit = 1M\n}\n'
        'hardware g "G" {\n    memory = 80 GiB\n    bandwidth = 2 TB/s\n}\n'
        'deployment d "D" {\n    model = m\n    hardware = g\n    let half = 8K\n    context = twice(half)\n}\n')
    program, values = evaluate_paths([str(spec)])
    assert values[("d", "context")] == 16384  # eval
    sweep = prepare(program, "d", ["half=1K:4K:x2"])
    inputs, results = sweep.run()
    assert list(results[sweep.results.index("context")]) == [2048, 4096, 8192]  # sweep
    solution = solve(program, "d", "half")
    assert solution.value is not None and solution.verified  # solve, through the SymPy form
    assert solution.value == values[("d", "max_context")] // 2 or abs(solution.value * 2 - values[("d", "max_context")]) <= 32
    wb, _ = build_workbook(program, values, [str(spec)])  # the workbook, through the Excel form
    formulas = [c.value for ws in wb.worksheets for row in ws.iter_rows() for c in row
                if isinstance(c.value, str) and c.value.startswith("=")]
    assert any("2*(" in text and "half" in text for text in formulas)


def test_a_function_without_a_form_cannot_be_registered():
    with pytest.raises(TypeError):
        Function("broken", 1, 1, exact=lambda args: args[0], sympy=lambda args: args[0], excel=lambda args: args[0])


def test_sympy_forms_built_without_evaluating_are_those_sympy_evaluates():
    x, y, z = sympy.Symbol("context", positive=True), sympy.Symbol("block_size"), sympy.Symbol("window")
    whole = sympy.Symbol("n", integer=True)
    rounded = [x / 16, x / y, 3 * x * y**2 / (7 * z), x, -x / y, x / y + 1, x / (x + 1), 2 * whole, sympy.Rational(7, 2),
               sympy.floor(x / 2) / 3]
    extremes = [(x, z), (y, z, x), (x, x), (x, 0), (x / 2, z), (x, sympy.Min(y, z))]
    for name, head in [("floor", sympy.floor), ("ceil", sympy.ceiling)]:
        for arg in rounded:
            assert sympy.srepr(FUNCTIONS[name].sympy([arg])) == sympy.srepr(head(arg)), (name, arg)
    for name, head in [("min", sympy.Min), ("max", sympy.Max)]:
        for args in extremes:
            assert sympy.srepr(FUNCTIONS[name].sympy(list(args))) == sympy.srepr(head(*args)), (name, args)


def test_whole_is_a_condition_on_numbers_of_any_dimension():
    whole = FUNCTIONS["whole"]
    assert whole.exact([Fraction(4)]) is True and whole.exact([Fraction(9, 2)]) is False
    assert whole.dims([TOKENS]) == BOOL
    assert list(whole.numpy([np.array([0.3 / 0.1 * 10, 2.5])])) == [True, False]  # snapped as eval computes it


def test_the_registry_is_what_the_checks_read(tmp_path):
    spec = _spec(tmp_path, "whole", "a / 2")
    program = build_program([str(spec)])
    assert program.cells[("m", "y")].dim == BOOL


def test_settings_reach_a_function(tmp_path):
    spec = _spec(tmp_path, "floor", "a / 2")
    values = evaluate_paths([str(spec)], [parse_setting("a=9")])[1]
    assert values[("m", "y")] == 4
