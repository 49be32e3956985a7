"""The Excel formula printer: expected text per rule, and values recalculated by LibreOffice."""

from __future__ import annotations

import math
import os
import shutil
import subprocess

import openpyxl
import pytest
from sympy import (Abs, Add, And, Eq, Float, Function, Integer, Integral, Max, Min, Mod, Mul, Ne, Not, Or,
                   Piecewise, Pow, Rational, S, Symbol, Xor, ceiling, floor, nan, oo, pi, sin,
                   sqrt, symbols, zoo)

from kvdsl.errors import ExportError
from kvdsl.excel.formula import excel_text_literal
from kvdsl.excel.printer import ExcelPrinter, excel_formula

x, y, z = symbols("x y z")
flag = Symbol("flag")


def upow(base, exp):
    """A power SymPy does not evaluate, to print nested powers of numbers."""
    return Pow(base, exp, evaluate=False)


CASES = [
    # arithmetic and Excel's precedence rules
    (x - y, "x-y"),
    (x + 2 * y, "x+2*y"),
    (-x - y, "-x-y"),
    (x * y / z, "x*y/z"),
    (x / (y * z), "x/(y*z)"),
    (Mul(2, x + y, evaluate=False), "2*(x+y)"),
    (-x**2, "-(x^2)"),
    (-x**2 * y, "-(x^2)*y"),
    ((-x)**3, "-(x^3)"),
    ((-x)**2, "x^2"),
    (upow(-2, 2), "(-2)^2"),
    (upow(2, upow(3, 2)), "2^(3^2)"),
    (upow(upow(2, 3), 2), "(2^3)^2"),
    ((x + 1)**2, "(x+1)^2"),
    (x**(-y), "x^(-y)"),
    (x**-1, "1/x"),
    (x**-2, "1/x^2"),
    (1 / (x + 1), "1/(x+1)"),
    (sqrt(x), "SQRT(x)"),
    (1 / sqrt(x), "1/SQRT(x)"),
    (x**Rational(1, 3), "x^(1/3)"),
    # numbers
    (Rational(9, 10), "9/10"),
    (Rational(-9, 10), "-9/10"),
    (Rational(9, 10) * x, "9*x/10"),
    (upow(Rational(9, 10), x), "(9/10)^x"),
    (Integer(123456789012345), "123456789012345"),
    (Integer(10**20), "100000000000000000000"),
    (Integer(123456789012345678), "(7716049313271*1000+605)*2^4"),
    (Integer(2**60), "2^60"),
    (Integer(-(2**60)), "-(2^60)"),
    (Float(0.1), "0.1"),
    (Float(2.5) * x, "2.5*x"),
    (Float(1e20), "1E+20"),
    (Float(1 / 3), "(6004799503160*1000+661)/2^54"),
    (pi * x, "PI()*x"),
    # functions
    (floor(x), "INT(x)"),
    (ceiling(x), "-INT(-x)"),
    (ceiling(-x), "-INT(x)"),
    (ceiling(x) + 1, "-INT(-x)+1"),
    (x - ceiling(y), "x-(-INT(-y))"),
    (Abs(x - 1), "ABS(x-1)"),
    (Min(x, Min(y, z, evaluate=False), evaluate=False), "MIN(x, y, z)"),
    (Max(x, Max(y, 3, evaluate=False), evaluate=False), "MAX(x, 3, y)"),
    (Max(x, Min(y, 2)), "MAX(x, MIN(2, y))"),
    (Mod(x, y), "(x-y*INT(x/y))"),
    # Piecewise
    (Piecewise((x, x > 0), (y, True)), "IF(x>0, x, y)"),
    (Piecewise((x, x > 0), (y, y > 0), (z, True)), "IF(x>0, x, IF(y>0, y, z))"),
    (Piecewise((1, x > 0), (2, x < 0), (3, Eq(x, 0))), "IF(x>0, 1, IF(x<0, 2, 3))"),
    (Piecewise((Piecewise((1, y > 0), (2, True)), x > 0), (3, True)), "IF(x>0, IF(y>0, 1, 2), 3)"),
    # logic
    (S.true, "TRUE"),
    (S.false, "FALSE"),
    (x < y, "x<y"),
    (x <= y, "x<=y"),
    (x > y, "x>y"),
    (x >= y, "x>=y"),
    (Eq(x, y), "x=y"),
    (Ne(x, 1), "x<>1"),
    (Eq(x + 1, -y), "x+1=-y"),
    (And(x > 0, y < 1), "AND(x>0, y<1)"),
    (Or(x > 0, y < 1), "OR(x>0, y<1)"),
    (Not(flag), "NOT(flag)"),
    (Xor(x > 0, y > 0), "AND(OR(x<=0, y<=0), OR(x>0, y>0))"),
]


@pytest.mark.parametrize("expr, text", CASES, ids=[t for _, t in CASES])
def test_prints(expr, text):
    assert excel_formula(expr) == text


def test_names_map_symbols_to_defined_names():
    n = Symbol("qwen3_8b.layers")
    assert excel_formula(2 * n + x, {"qwen3_8b.layers": "qwen3_8b.layers", "x": "Sheet1!$B$2"}) \
        == "2*qwen3_8b.layers+Sheet1!$B$2"
    assert excel_formula(x**2, {"x": "-3"}) == "(-3)^2"


def test_unnamed_symbol_is_strict():
    with pytest.raises(ExportError):
        excel_formula(x + y, {"x": "a"})
    assert ExcelPrinter({"names": {"x": "a"}, "strict": False}).doprint(x + y) == "a+y"


@pytest.mark.parametrize("expr", [sin(x), Integral(x, x), zoo, nan, -oo, S.ImaginaryUnit * x,
                                  Function("g")(x), Piecewise((1, x > 0)), Integer(10**400)],
                         ids=str)
def test_unsupported_raises(expr):
    with pytest.raises(ExportError):
        excel_formula(expr)


def test_unbounded_is_a_large_number():
    assert excel_formula(oo) == "1E+300"


def test_excel_limits():
    deep = x
    for _ in range(64):  # unevaluated: SymPy's assumptions on nested Abs cost seconds
        deep = Abs(Add(deep, -1, evaluate=False), evaluate=False)
    assert excel_formula(deep).count("ABS(") == 64
    with pytest.raises(ExportError):  # Excel nests at most 64 functions
        excel_formula(Abs(Add(deep, -1, evaluate=False), evaluate=False))
    with pytest.raises(ExportError):  # and takes at most 8192 characters
        excel_formula(Add(*(Symbol(f"name_{i}") for i in range(1000))))


def test_text_literal():
    assert excel_text_literal('a"b') == '"a""b"'
    assert excel_text_literal("") == '""'
    with pytest.raises(ExportError):
        excel_text_literal("x" * 256)


# -- LibreOffice recalculates what the printer wrote --------------------------

a, b, c, d = symbols("a b c d")
VALUES = {a: 2, b: -3, c: Rational(5, 2), d: Rational(-5, 2)}
NAMES = {"a": "2", "b": "-3", "c": "2.5", "d": "-2.5"}

NUMERIC = [
    -a**2, b**2, -b**2, upow(2, upow(3, 2)), upow(upow(2, 3), 2), upow(-2, 2), upow(-2, 3),
    floor(c), floor(d), ceiling(c), ceiling(d), floor(-c / 3), ceiling(-c / 3), ceiling(b / a),
    Abs(d), sqrt(c), 1 / sqrt(c), a**-2, c**Rational(1, 3), Mod(b, a), Mod(c, -a),
    Rational(9, 10) * c, Rational(-9, 10) * d, c / (a * b), (c - d) / (a + b),
    Min(a, Min(b, c, evaluate=False), evaluate=False), Max(a, Min(b, c), d), Max(-c, d) - Min(a, b),
    Piecewise((a, b > 0), (c, d > 0), (d, True)),
    Piecewise((Piecewise((1, a > 3), (2, True)), c > 0), (3, True)),
    Piecewise((1, b > 0), (2, b < 0), (3, Eq(b, 0))),
    Integer(123456789012345678), Integer(-(2**70) - 12345), Integer(10**20) * c, Float(1 / 3) * a,
    pi * c, a - ceiling(d),
    S.true, S.false, a < b, a <= 2, c > d, d >= c, Eq(a, 2), Ne(a, 2),
    And(a > 0, b < 0), Or(a < 0, b > 0), Not(And(a > 0, b > 0)), Xor(a > 0, b > 0),
]
# Formulas that show why the parentheses are there: Excel and LibreOffice apply
# unary minus before ^, and ^ groups to the left.
QUIRKS = [("-2^2", 4), ("2^3^2", 64)]


def _recalculate(formulas: list[str], tmp_path) -> list:
    """Write `=formula` cells, let LibreOffice recalculate, read the values."""
    wb = openpyxl.Workbook()
    for i, text in enumerate(formulas, start=1):
        wb.active[f"A{i}"] = "=" + text
    src, out = tmp_path / "formulas.xlsx", tmp_path / "out"
    wb.save(src)
    soffice = shutil.which("soffice")
    assert soffice, "LibreOffice (soffice) is required for this test in CI"
    profile = (tmp_path / "lo-profile").as_uri()
    subprocess.run([soffice, f"-env:UserInstallation={profile}", "--headless",
                    "--convert-to", "xlsx", "--outdir", str(out), str(src)],
                   check=True, capture_output=True, timeout=180)
    sheet = openpyxl.load_workbook(out / "formulas.xlsx", data_only=True).active
    return [sheet[f"A{i}"].value for i in range(1, len(formulas) + 1)]


@pytest.mark.libreoffice
@pytest.mark.skipif(shutil.which("soffice") is None and not os.environ.get("CI"),
                    reason="LibreOffice is not installed")
def test_libreoffice_agrees_with_sympy(tmp_path):
    formulas = [excel_formula(e, NAMES) for e in NUMERIC] + [q for q, _ in QUIRKS]
    values = _recalculate(formulas, tmp_path)
    for expr, text, got in zip(NUMERIC, formulas, values):
        want = expr.subs(VALUES)
        if want in (S.true, S.false):
            assert got is bool(want), (expr, text, got)
        else:
            assert isinstance(got, (int, float)) and not isinstance(got, bool), (expr, text, got)
            assert math.isclose(got, float(want.evalf()), rel_tol=1e-9), (expr, text, got)
    assert values[len(NUMERIC):] == [v for _, v in QUIRKS]
