"""The catalog workbook computed by a second spreadsheet engine, the `formulas` package (Excel's semantics,
implemented independently of LibreOffice), equals `kvdsl eval`, also after inputs are typed into it.

`tests/test_workbook.py` compares the same workbook recalculated by LibreOffice with `eval` and with
this engine, cell by cell.  No LibreOffice here: these tests run wherever `formulas` is installed
(the test extras install it).  Every function a formula calls is one Excel reads without a prefix.
"""

from __future__ import annotations

import os
import re

import openpyxl
import pytest

from kvdsl.functions import FUNCTIONS
from second_engine import SecondEngine, shared_catalog_values
from test_workbook import ALL_CHANGES
from workbook_helpers import CATALOG, ROOT, eval_json, export, same_value, typed_cell, typed_value

if not os.environ.get("CI"):  # in CI (the CI variable set) the test extras are installed: a missing package fails
    pytest.importorskip("formulas")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """(the catalog workbook read with openpyxl, its formula cells as `formulas` computes them)."""
    path, values = shared_catalog_values(tmp_path_factory)
    return openpyxl.load_workbook(path), values


def engine(catalog) -> SecondEngine:
    """A second-engine copy of the catalog workbook, its formulas' values taken from the shared run."""
    wb, values = catalog
    book = SecondEngine(wb)
    book.seed(values)
    return book


def compare(book: SecondEngine, blocks: dict) -> tuple:
    """(cells compared, mismatches) of every value `eval --json` gives, text included, against `book`."""
    count, bad = 0, []
    for block, info in blocks.items():
        for cell, entry in info["cells"].items():
            want, got = entry["value"], book.named(f"{block}.{cell}")
            count += 1
            if want is None:  # `none`: not applicable, NA() in a workbook
                ok = got == "#N/A"
            elif isinstance(want, str):
                ok = got == want
            else:
                ok = same_value(want, got)
            if not ok:
                bad.append((f"{block}.{cell}", want, got))
    return count, bad


def test_every_named_cell_equals_eval(catalog):
    count, bad = compare(engine(catalog), eval_json(CATALOG))
    assert not bad, f"{len(bad)} of {count} cells differ, e.g. {bad[:15]}"
    assert count > 9000


def test_typed_inputs_recompute_to_eval_with_set(catalog):
    """The inputs tests/test_workbook.py types for LibreOffice, typed here: every named cell equals `eval --set`."""
    wb, _ = catalog
    book = engine(catalog)
    for name, value in ALL_CHANGES:
        cell, factor = typed_cell(wb, name)
        book.set(f"'{cell.parent.title}'!{cell.coordinate}", typed_value(value, factor))
    settings = [f"{name}={str(value).lower() if isinstance(value, bool) else value}" for name, value in ALL_CHANGES]
    count, bad = compare(book, eval_json(CATALOG, settings))
    assert not bad, f"--set {settings}: {len(bad)} of {count} cells differ, e.g. {bad[:15]}"
    assert book.compiled < 50, "the typed values should need no formula of a new shape"


# ---- the functions Excel reads without a prefix -------------------------------------------------
#
# [MS-XLSX] 2.2.2 ("Formulas"): a function added after the original file format (Excel 2010 and later,
# a "future function") is stored as `_xlfn.NAME`; written without the prefix, Excel reads it as an
# unknown name (#NAME?).  The predefined functions are those of ECMA-376 Part 1, 18.17.7, which openpyxl
# lists as `FORMULAE`; the future functions below carry the prefix although some share those names.
FUTURE_FUNCTIONS = frozenset("""
ACOT ACOTH AGGREGATE ARABIC BASE BETA.DIST BETA.INV BINOM.DIST BINOM.DIST.RANGE BINOM.INV BITAND BITLSHIFT BITOR
BITRSHIFT BITXOR CEILING.MATH CEILING.PRECISE CHISQ.DIST CHISQ.DIST.RT CHISQ.INV CHISQ.INV.RT CHISQ.TEST COMBINA
CONCAT CONFIDENCE.NORM CONFIDENCE.T COT COTH COVARIANCE.P COVARIANCE.S CSC CSCH DAYS DECIMAL ECMA.CEILING ERF.PRECISE
ERFC.PRECISE EXPON.DIST F.DIST F.DIST.RT F.INV F.INV.RT F.TEST FILTERXML FLOOR.MATH FLOOR.PRECISE FORECAST.ETS
FORECAST.ETS.CONFINT FORECAST.ETS.SEASONALITY FORECAST.ETS.STAT FORECAST.LINEAR FORMULATEXT GAMMA GAMMA.DIST
GAMMA.INV GAMMALN.PRECISE GAUSS HYPGEOM.DIST IFNA IFS IMCOSH IMCOT IMCSC IMCSCH IMSEC IMSECH IMSINH IMTAN ISFORMULA
ISO.CEILING ISOWEEKNUM LOGNORM.DIST LOGNORM.INV MAXIFS MINIFS MODE.MULT MODE.SNGL MUNIT NEGBINOM.DIST
NETWORKDAYS.INTL NORM.DIST NORM.INV NORM.S.DIST NORM.S.INV NUMBERVALUE PDURATION PERCENTILE.EXC PERCENTILE.INC
PERCENTRANK.EXC PERCENTRANK.INC PERMUTATIONA PHI POISSON.DIST QUARTILE.EXC QUARTILE.INC QUERYSTRING RANK.AVG RANK.EQ
RRI SEC SECH SHEET SHEETS SKEW.P STDEV.P STDEV.S SWITCH T.DIST T.DIST.2T T.DIST.RT T.INV T.INV.2T T.TEST TEXTJOIN
UNICHAR UNICODE VAR.P VAR.S WEBSERVICE WEIBULL.DIST WORKDAY.INTL XOR Z.TEST
ANCHORARRAY LAMBDA LET RANDARRAY SEQUENCE SINGLE SORT SORTBY UNIQUE XLOOKUP XMATCH FILTER
""".split())
_CALL = re.compile(r'"(?:[^"]|"")*"|(?<![A-Za-z0-9_.])([A-Za-z][A-Za-z0-9.]*)\(')


def called_functions(formula: str) -> set:
    """The function names a formula calls (text in quotes skipped)."""
    return {m.group(1).upper() for m in _CALL.finditer(formula) if m.group(1)}


def excel_reads_without_prefix(name: str) -> bool:
    from openpyxl.utils.formulas import FORMULAE

    return name in FORMULAE and name not in FUTURE_FUNCTIONS


def test_the_prefix_rule_itself():
    assert called_functions('=IF(a.b>1,"MAX(x)",-INT(-MIN(c.d, 2)))') == {"IF", "INT", "MIN"}
    assert all(excel_reads_without_prefix(f) for f in ("IF", "INDEX", "MATCH", "FIXED", "ISNA", "NA", "INT"))
    assert not any(excel_reads_without_prefix(f) for f in ("IFS", "CONCAT", "CEILING.MATH", "LET", "XLOOKUP", "STDEV.S"))


def test_every_function_the_printer_emits_needs_no_prefix(catalog, tmp_path):
    """Every formula of the exported workbooks (cells, validations, highlights) and every function's Excel form."""
    emitted: dict = {}
    small = openpyxl.load_workbook(export(ROOT / "specs" / "engine_logs" / "catalog.kvspec", tmp_path / "logs.xlsx"))
    for wb in (catalog[0], small):
        for ws in wb.worksheets:
            texts = [c.value for row in ws.iter_rows() for c in row if c.data_type == "f"]
            texts += [f for dv in ws.data_validations.dataValidation for f in (dv.formula1, dv.formula2) if f]
            texts += [f for cf in ws.conditional_formatting for rule in cf.rules for f in rule.formula]
            for text in texts:
                for name in called_functions(str(text)):
                    emitted.setdefault(name, f"{ws.title}: {text[:80]}")
    for function in FUNCTIONS.values():  # the forms a spec may call, used in the catalog or not
        for name in called_functions("=" + function.excel(["a.b"] * max(function.min_args, 1))):
            emitted.setdefault(name, f"kvdsl.functions `{function.name}`")
    refused = {name: where for name, where in emitted.items() if not excel_reads_without_prefix(name)}
    assert not refused, refused
    assert {"IF", "INDEX", "MATCH", "MIN", "MAX", "INT"} <= set(emitted), sorted(emitted)
