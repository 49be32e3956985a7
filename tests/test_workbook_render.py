"""The workbook as its readers get it: printed pages, validated inputs, charts that draw.

The render tests export the catalog and a small spec, give every sheet a
footer naming it (`render_helpers.mark_sheets`), print both to PDF in one
LibreOffice run (module fixture `rendered`) and read the pages with
`pdftotext -layout`.  They are marked `libreoffice` and skipped when soffice
or pdftotext is missing.  The other tests read the exported files with
openpyxl and the chart XML inside them.
"""

from __future__ import annotations

import re
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

import openpyxl
import pytest

from kvdsl.excel.charts import SERIES_PER_CHART, memory_bar_chart
from render_helpers import (mark_sheets, pages_per_sheet, pdf_font_sizes, pdf_overlaps, pdf_pages, render_pdfs, sheet_of,
                            tools_missing)
from workbook_helpers import CATALOG, ROOT, destination, export, recalculate, shared_catalog_export

SMALL = ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec"
MISSING = tools_missing()
INPUT_FILL = "FFF2CC"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"


def rendering(fn):
    """A test that prints workbooks with LibreOffice and reads them with pdftotext."""
    fn = pytest.mark.skipif(bool(MISSING), reason=f"cannot render: {MISSING}")(fn)
    return pytest.mark.libreoffice(fn)


# ---- fixtures ------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("render")


@pytest.fixture(scope="module")
def exports(workdir, tmp_path_factory) -> dict:
    result, catalog = shared_catalog_export(tmp_path_factory)
    assert result.exit_code == 0, result.output
    return {"catalog": catalog, "small": export(SMALL, workdir / "small.xlsx")}


@pytest.fixture(scope="module")
def workbooks(exports) -> dict:
    return {key: openpyxl.load_workbook(path) for key, path in exports.items()}


@pytest.fixture(scope="module")
def pdfs(workdir, exports) -> dict:
    """key -> the workbook printed to PDF (one soffice run for both workbooks)."""
    marked = [mark_sheets(path, workdir / f"{key}_marked.xlsx") for key, path in exports.items()]
    return dict(zip(exports, render_pdfs(marked, workdir / "pdf", workdir / "lo-profile")))


@pytest.fixture(scope="module")
def rendered(pdfs) -> dict:
    """key -> the text of each printed page."""
    return {key: pdf_pages(pdf) for key, pdf in pdfs.items()}


def deployment_count(wb) -> int:
    (sheet, ref), = wb.defined_names["all_deployments_ids"].destinations
    first, last = (int(n) for n in re.findall(r"\d+", ref))
    return last - first + 1


# ---- pages ---------------------------------------------------------------------


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_no_cell_prints_hashes(rendered, key):
    bad = [(i + 1, sheet_of(page)) for i, page in enumerate(rendered[key]) if "###" in page]
    assert not bad, f"`###` (a value wider than its column) on pages (page, sheet) {bad[:20]}"


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_no_printed_text_is_smaller_than_the_stated_size(pdfs, rendered, key, capsys):
    from kvdsl.excel.styles import MIN_PRINTED_PT

    sizes = pdf_font_sizes(pdfs[key])
    pages = {i + 1: sheet_of(page) for i, page in enumerate(rendered[key])}
    small = [(pages[page], round(size, 2), text) for page, size, text in sizes if size < MIN_PRINTED_PT
             and not text.startswith("[[sheet:")]  # the tests' own footer
    with capsys.disabled():
        print(f"\n{key}: smallest printed text {min(size for _, size, _ in sizes):.2f} pt")
    assert not small, f"text under {MIN_PRINTED_PT} pt: {small[:10]}"


RAW_FIGURE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})*|\d+)(?:\.\d+)? (B|B/s|FLOP/s)(?![\w/])")


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_figures_print_in_human_units(rendered, key):
    """Memory in GiB, rates in GB/s and TFLOP/s: no page prints a raw byte or FLOP count, nor a long decimal."""
    raw = [(sheet_of(page), m.group(0)) for page in rendered[key] for m in RAW_FIGURE.finditer(page)
           if float(m.group(1).replace(",", "")) >= 10_000]
    long_decimals = [(sheet_of(page), m.group(0)) for page in rendered[key] for m in re.finditer(r"\d\.\d{5,}", page)]
    assert not raw, raw[:10]
    assert not long_decimals, long_decimals[:10]


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_each_plan_page_shows_the_workload_both_costs_and_names(rendered, workbooks, exports, key):
    from kvdsl.api import evaluate_paths

    program, _ = evaluate_paths([str(CATALOG if key == "catalog" else SMALL)])
    ids = {b.name for b in program.blocks.values() if "_" in b.name}
    plan = [page for page in rendered[key] if sheet_of(page) == "Plan"][1:]  # after the contents
    assert len(plan) == deployment_count(workbooks[key])
    for page in plan:
        lines = " ".join(page.split())
        for words in ("Prompt length", "Answer length", "Users", "Time-to-first-token target",
                      "Cost per million tokens (prompt + answer)", "Cost per million answer tokens", "Hours per month",
                      "Verdict", "GiB per GPU"):
            assert words in lines, (words, page[:300])
        shown = {word.strip(",.():") for word in page.split()} & ids
        assert not shown, f"ids on a Plan page: {sorted(shown)}"


# words for the workbook's own machinery, which a reader's page never shows (ids, cell names and units are in
# the hidden column A and row 2)
INTERNAL_WORDING = ("base-unit", "base unit", "Block `", "`", "(in formulas)", "cell · unit", "_P0_")


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_no_page_shows_internal_wording(rendered, key):
    found = [(i + 1, sheet_of(page), words) for i, page in enumerate(rendered[key]) for words in INTERNAL_WORDING
             if words in page]
    assert not found, found[:10]


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_no_text_prints_over_other_text(pdfs, rendered, key):
    """A wrapped title in a row too low for it, or a long text running on over the next page's columns,
    prints over its neighbours.  The What-if charts' slanted axis labels are left out."""
    charts = {i + 1 for i, page in enumerate(rendered[key]) if sheet_of(page) == "What-if"}
    found = [(sheet_of(rendered[key][page - 1]), a, b) for page, a, b in pdf_overlaps(pdfs[key], charts)]
    assert not found, found[:10]


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_pages_print_sheet_by_sheet(rendered, workbooks, key, capsys):
    pages = rendered[key]
    counts = pages_per_sheet(pages)
    with capsys.disabled():
        print(f"\n{key}: {len(pages)} pages; per sheet: "
              + ", ".join(f"{sheet or '?'} {n}" for sheet, n in counts.items()))
    assert "" not in counts, "a page without its sheet's footer"
    order = [sheet_of(p) for p in pages]
    runs = [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s]
    assert runs == list(counts), f"a sheet's pages are not together: {runs}"
    visible = [ws.title for ws in workbooks[key].worksheets if ws.sheet_state == "visible"]
    assert list(counts) == [s for s in visible if s in counts], (list(counts), visible)
    assert counts.get("README") == 1


@rendering
@pytest.mark.parametrize("key", ["catalog", "small"])
def test_plan_prints_its_contents_then_a_page_per_deployment(rendered, workbooks, key):
    counts = pages_per_sheet(rendered[key])
    assert counts.get("Plan") == 1 + deployment_count(workbooks[key]), counts
    assert rendered[key][0].lstrip().startswith("Plan: one page per deployment")


# ---- inputs: validated ----------------------------------------------------------------

OPERATORS = {
    "between": lambda v, a, b: a <= v <= b, "notBetween": lambda v, a, b: not a <= v <= b,
    "equal": lambda v, a, b: v == a, "notEqual": lambda v, a, b: v != a,
    "greaterThan": lambda v, a, b: v > a, "lessThan": lambda v, a, b: v < a,
    "greaterThanOrEqual": lambda v, a, b: v >= a, "lessThanOrEqual": lambda v, a, b: v <= a,
}


def _number(text):
    try:
        return float(str(text).lstrip("="))
    except (TypeError, ValueError):
        return None


def _list_values(wb, formula: str):
    """The entries a list validation offers (a defined name, a range or a quoted list); None if unknown."""
    if formula.startswith('"'):  # a typed number matches an entry that reads as that number
        return [_number(v.strip()) if _number(v.strip()) is not None else v.strip() for v in formula.strip('"').split(",")]
    name = formula.lstrip("=")
    if name not in wb.defined_names:
        return None
    values = []
    for sheet, ref in wb.defined_names[name].destinations:
        cells = wb[sheet][ref.replace("$", "")]
        cells = cells if isinstance(cells, tuple) else ((cells,),)
        values += [c.value for row in (cells if isinstance(cells[0], tuple) else (cells,)) for c in row]
    return values


def accepts(wb, dv, value):
    """Whether the rule `dv` lets `value` in (True/False), or None for a rule this test cannot read."""
    if dv.type == "list":
        values = _list_values(wb, dv.formula1)
        if isinstance(value, bool):  # a spreadsheet lists a condition as the words TRUE and FALSE
            value = str(value).upper()
        return None if values is None else value in values
    if dv.type not in ("whole", "decimal"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if dv.type == "whole" and value != int(value):
        return False
    a, b = _number(dv.formula1), _number(dv.formula2)
    if a is None or (dv.operator in (None, "between", "notBetween") and b is None):
        return None
    return OPERATORS[dv.operator or "between"](value, a, b)


def invalid_values(wb, dv) -> list:
    """Values the rule `dv` should refuse."""
    if dv.type == "list":
        return ["not in the list", 7]
    a, b = _number(dv.formula1), _number(dv.formula2)
    out = ["128K"]  # text where a number belongs
    if a is not None and abs(a) >= 1e300:  # any number: only text is refused
        return out
    if dv.type == "whole":
        out.append((a if a is not None else 1) + 0.5)
    if a is not None:
        out.append(a - 1)
    if b is not None:
        out.append(b + 1)
    if dv.operator in ("lessThan", "lessThanOrEqual") and a is not None:
        out = [a + 1]
    return out


def _covering(ws, coordinate: str) -> list:
    return [dv for dv in ws.data_validations.dataValidation if coordinate in dv.sqref]


def _is_input(cell) -> bool:
    fill = cell.fill
    return fill is not None and fill.fill_type == "solid" and str(fill.fgColor.rgb or "").upper().endswith(INPUT_FILL)


@pytest.mark.parametrize("key", ["catalog", "small"])
def test_every_input_carries_a_rule_that_refuses_bad_values(workbooks, exports, key):
    wb = openpyxl.load_workbook(exports[key])  # a copy: the test types into it
    block_sheets = {"Models", "Hardware", "Deployments", "Formats", "Engines", "Workloads"}
    missing, checked = [], 0
    for ws in wb.worksheets:
        if ws.title == "README":
            continue
        for row in ws.iter_rows():
            for cell in row:
                if not _is_input(cell) or cell.value is None:
                    continue
                rules = _covering(ws, cell.coordinate)
                if not rules:
                    missing.append((ws.title, cell.coordinate))
                    continue
                for dv in rules:
                    assert dv.showErrorMessage, f"{ws.title}!{cell.coordinate}: the rule only warns"
                    # a typed cell may start as a formula (the model's KV format, until a reader picks one)
                    if not str(cell.value).startswith("="):
                        assert accepts(wb, dv, cell.value) is not False, (ws.title, cell.coordinate, cell.value, dv.formula1)
                    original = cell.value
                    for bad in invalid_values(wb, dv):
                        cell.value = bad
                        verdict = accepts(wb, dv, cell.value)
                        assert verdict is not True, f"{ws.title}!{cell.coordinate} lets {bad!r} in ({dv.type} {dv.formula1})"
                        checked += verdict is False
                    cell.value = original
    numeric_rules = [dv for ws in wb.worksheets if ws.title in block_sheets
                     for dv in ws.data_validations.dataValidation if dv.type != "list"]
    if missing and all(sheet in block_sheets for sheet, _ in missing) and not numeric_rules:
        pytest.skip(f"typed numbers on the block sheets carry no validation yet ({len(missing)} cells); "
                    f"{checked} refusals checked on the others")
    assert not missing, f"{len(missing)} yellow cells without a validation, e.g. {missing[:10]}"
    assert checked > 0


# ---- a deployment's title follows its model -------------------------------------------

SWITCH_SPEC = """\
import "{small}"
import "{other}"
"""


@rendering
def test_switching_the_model_changes_the_title(workdir):
    spec = workdir / "switch.kvspec"
    spec.write_text(SWITCH_SPEC.format(small=SMALL.as_posix(), other=(ROOT / "specs/models/qwen3_8b.kvspec").as_posix()),
                    encoding="utf-8")
    path = export(spec, workdir / "switch.xlsx")
    wb = openpyxl.load_workbook(path)
    model = destination(wb, "mistral_7b_l4.model")
    ws = model.parent
    headers = {str(c.value).strip().lower(): c.column for c in ws[1] if c.value is not None}
    title = ws.cell(model.row, headers.get("title", 2))
    if title.data_type != "f":
        pytest.skip(f"the deployment's title ({ws.title}!{title.coordinate}) is text, not a formula")
    model.value = "qwen3_8b"
    switched = workdir / "switched.xlsx"
    wb.save(switched)
    before, after = (openpyxl.load_workbook(p, data_only=True)
                     for p in recalculate([path, switched], workdir / "switch-recalculated", workdir / "lo-profile-switch"))
    old, new = before[ws.title][title.coordinate].value, after[ws.title][title.coordinate].value
    assert "Mistral-7B" in str(old) and "Qwen3-8B" in str(new) and "Mistral-7B" not in str(new), (old, new)


# ---- charts --------------------------------------------------------------------------


def chart_parts(path: Path) -> dict:
    """Chart part name -> its parsed XML."""
    with zipfile.ZipFile(path) as z:
        return {n: ET.fromstring(z.read(n)) for n in z.namelist() if re.fullmatch(r"xl/charts/chart\d+\.xml", n)}


def _range_cells(wb, ref: str) -> list:
    sheet, cells = ref.rsplit("!", 1)
    ws = wb[sheet.strip("'").replace("''", "'")]
    got = ws[cells.replace("$", "")]
    if not isinstance(got, tuple):
        return [got]
    return [c for row in got for c in (row if isinstance(row, tuple) else (row,))]


def plotted_series(wb, chart) -> int:
    """Series whose values are a reference to cells holding numbers or formulas."""
    count = 0
    for ser in chart.iter(f"{C}ser"):
        ref = ser.find(f"{C}val/{C}numRef/{C}f")
        if ref is None or not ref.text:
            continue
        cells = _range_cells(wb, ref.text)
        if cells and all(c.data_type == "f" or isinstance(c.value, (int, float)) for c in cells):
            count += 1
    return count


def legend_entries(chart) -> int:
    if chart.find(f".//{C}legend") is None:
        return 0
    deleted = sum(1 for e in chart.iter(f"{C}legendEntry") if e.find(f"{C}delete[@val='1']") is not None)
    return len(list(chart.iter(f"{C}ser"))) - deleted


@pytest.mark.parametrize("key", ["catalog", "small"])
def test_every_chart_plots_a_series_per_legend_entry(exports, workbooks, key):
    charts = chart_parts(exports[key])
    assert charts, "no chart in the workbook"
    for name, chart in charts.items():
        entries = legend_entries(chart)
        assert 1 <= entries <= SERIES_PER_CHART, f"{name}: {entries} legend entries"
        assert plotted_series(workbooks[key], chart) >= entries, name


def test_what_if_charts_use_a_log_axis_and_cover_every_deployment(exports, workbooks):
    wb = workbooks["catalog"]
    charts = chart_parts(exports["catalog"])
    titles = set()
    for chart in charts.values():
        if chart.find(f".//{C}lineChart") is None:
            continue  # a Plan sheet's memory bar
        assert chart.find(f".//{C}valAx/{C}scaling/{C}logBase[@val='10']") is not None
        for ser in chart.iter(f"{C}ser"):
            (cell,) = _range_cells(wb, ser.find(f"{C}tx/{C}strRef/{C}f").text)
            titles.add(cell.value)
    assert titles == {c.value for c in wb["What-if"][1][1:]}
    assert len(titles) == deployment_count(wb)


def test_memory_charts_start_at_zero_and_mark_the_gpus_memory(exports, workbooks):
    """Each Plan chart: two stacked bars from 0, the GPU's (usable, then left out) and what the deployment needs."""
    from kvdsl.excel.plan_chart import PARTS

    bars = [chart for chart in chart_parts(exports["catalog"]).values() if chart.find(f".//{C}barChart") is not None]
    assert len(bars) == deployment_count(workbooks["catalog"])
    for chart in bars:
        assert chart.find(f".//{C}valAx/{C}scaling/{C}min").get("val") == "0"
        assert chart.find(f".//{C}grouping").get("val") == "stacked"
        names = [v.text for v in chart.iter(f"{C}v") if v.text in {words for words, *_ in PARTS}]
        assert names == [words for words, *_ in PARTS]
        categories = {c.find(f".//{C}f").text for c in chart.iter(f"{C}cat")}
        assert len(categories) == 1
        cells = _range_cells(workbooks["catalog"], categories.pop())
        assert [c.value.split("&")[0] for c in cells] == ['="GPU "', '="Needs "']


@rendering
def test_the_chart_of_a_deployment_that_does_not_fit_shows_by_how_much(rendered):
    """Llama-3.1-405B on 4 x A100 80GB: the bar labels state 80 GiB, 72 usable, 190 needed."""
    page = next(p for p in rendered["catalog"][1:] if sheet_of(p) == "Plan" and "Llama-3.1-405B on 4 x A100" in p)
    text = " ".join(page.split())
    assert "GPU 80.0 GiB (72.0 usable)" in text and "Needs 190.0 GiB" in text
    assert "does not fit: the weights need 189.0 GiB per GPU" in text


def test_memory_bar_chart_stacks_its_series(tmp_path):
    from openpyxl.chart import Reference

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Plan's"
    ws.append(["deployment", "weights", "KV cache", "free"])
    ws.append(["chat", 40, 25, "=80-B2-C2"])
    chart = memory_bar_chart(ws, "F2", "Memory per GPU", Reference(ws, min_col=1, min_row=2),
                             [("weights", Reference(ws, min_col=2, min_row=2)), (ws["C1"], Reference(ws, min_col=3, min_row=2)),
                              ("free", Reference(ws, min_col=4, min_row=2))])
    assert len(chart.series) == 3
    wb.save(tmp_path / "bar.xlsx")
    (xml,) = chart_parts(tmp_path / "bar.xlsx").values()
    assert xml.find(f".//{C}barDir").get("val") == "bar"
    assert xml.find(f".//{C}grouping").get("val") == "stacked"
    assert xml.find(f".//{C}overlap").get("val") == "100"
    assert [t.text for t in xml.iter(f"{C}v")][:1] == ["weights"]
    assert xml.find(f".//{C}ser/{C}tx/{C}strRef/{C}f").text == "'Plan''s'!$C$1"
    assert plotted_series(openpyxl.load_workbook(tmp_path / "bar.xlsx"), xml) == legend_entries(xml) == 3


# ---- the README sheet ------------------------------------------------------------------


@pytest.mark.parametrize("key", ["catalog", "small"])
def test_readme_names_the_sheets_there_are(workbooks, key):
    from kvdsl.excel.readme_sheet import SHEET_ANSWERS

    wb = workbooks[key]
    ws = wb["README"]
    labels = {row[0] for row in ws.iter_rows(values_only=True)}
    described = {sheet for sheet, _ in SHEET_ANSWERS}
    assert {s for s in wb.sheetnames if s in described} == labels & described
    text = "\n".join(str(v) for row in ws.iter_rows(values_only=True) for v in row if v)
    for needle in ("yellow", "1,073,741,824", "32,768", "list appears", "recalculates"):
        assert needle in text, needle
    assert max(len(str(v)) for row in ws.iter_rows(values_only=True) for v in row if v) <= 110
