"""The workbook as its readers see it: the Plan sheet, labels, Yes/No, validations, highlights, print setup.

Structure only (openpyxl reads the file back); tests/test_workbook.py
recalculates the same workbook in LibreOffice and compares every named cell
with `kvdsl eval`.
"""

from __future__ import annotations

from fractions import Fraction

import openpyxl
import pytest

from kvdsl.api import evaluate_paths
from kvdsl.labels import describe
from kvdsl.excel.cells import SHEETS
from kvdsl.excel.styles import YES_NO
from workbook_helpers import CATALOG, ROOT, destination, export, shared_catalog_export, typed_cell

MISTRAL = ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    result, out = shared_catalog_export(tmp_path_factory)
    assert result.exit_code == 0, result.output
    return openpyxl.load_workbook(out)


@pytest.fixture(scope="module")
def program():
    return evaluate_paths([str(CATALOG)])


def deployments(program):
    return [b.name for b in program[0].user_blocks() if b.kind == "deployment"]


def accepts(dv, value) -> bool:
    """What Excel does with `value` typed into a cell under the number validation `dv` (or a quoted list of numbers)."""
    if dv.type == "list":
        return isinstance(value, (int, float)) and value in [float(v) for v in dv.formula1.strip('"').split(",")]
    if dv.type == "whole" and (not isinstance(value, (int, float)) or value != int(value)):
        return False
    if dv.type in ("whole", "decimal") and not isinstance(value, (int, float)):
        return False
    low, high = Fraction(dv.formula1), Fraction(dv.formula2) if dv.formula2 is not None else None
    value = Fraction(value)
    return {"between": lambda: low <= value <= high, "greaterThanOrEqual": lambda: value >= low,
            "lessThanOrEqual": lambda: value <= low}[dv.operator]()


def validation_of(cell):
    found = [dv for dv in cell.parent.data_validations.dataValidation if cell.coordinate in dv.sqref]
    assert len(found) == 1, (cell.coordinate, found)
    return found[0]


def test_sheet_order(catalog):
    assert catalog.sheetnames[:5] == ["Plan", "Deployments", "Models", "Hardware", "Workloads"]


def test_headers_carry_labels_names_and_descriptions(catalog, program):
    prog, _ = program
    checked, described = 0, 0
    for kind, sheet in SHEETS.items():
        ws = catalog[sheet]
        seen = {}
        for info in prog.blocks.values():
            if info.kind != kind or (info.prelude and kind not in ("format", "engine", "workload")):
                continue
            for cell in info.cells:
                col = destination(catalog, f"{info.name}.{cell}").column
                seen.setdefault(col, (cell, []))[1].append(describe(prog.cells[(info.name, cell)]))
        for col, (cell, texts) in seen.items():
            assert ws.cell(1, col).value in {label for label, _ in texts}, (sheet, cell)
            assert str(ws.cell(2, col).value).split(" · ")[0] == cell, (sheet, cell)
            note = ws.cell(1, col).comment.text
            assert f"({cell})" in note
            descriptions = [d for _, d in texts if d]
            if descriptions:
                assert any(d in note for d in descriptions), (sheet, cell, note)
                described += 1
            checked += 1
    assert checked > 300 and described > 50, (checked, described)


def test_booleans_read_yes_no(catalog, program):
    prog, values = program
    for d in deployments(program):
        fits = destination(catalog, f"{d}.fits")
        assert fits.data_type == "f" and fits.number_format == "General"
        yes_no = [cf for cf in fits.parent.conditional_formatting if fits.coordinate in cf.sqref
                  and any(r.dxf is not None and r.dxf.numFmt is not None and r.dxf.numFmt.formatCode == YES_NO for r in cf.rules)]
        assert yes_no, d
        assert isinstance(values[(d, "fits")], bool)
    plan = [c.value for c in catalog["Plan"]["F"] if isinstance(c.value, str)]
    assert sum(1 for v in plan if v.startswith("=IF(") and '"Yes","No"' in v) == 2 * len(deployments(program))


def test_every_plan_input_is_validated(catalog, program):
    prog, values = program
    checked = 0
    for d in deployments(program):
        for cell in ("model", "hardware", "gpus", "replicas", "context", "batch", "kv_dtype", "engine", "workload",
                     "utilization", "reserve_bytes"):
            if prog.cells[(d, cell)].form == "unknown":
                continue
            target, factor = typed_cell(catalog, f"{d}.{cell}")
            assert target.parent.title == "Plan", (d, cell)
            dv = validation_of(target)
            if prog.cells[(d, cell)].form == "ref":
                assert dv.type == "list"
            else:
                assert dv.showInputMessage and dv.prompt and dv.showErrorMessage
                if prog.cells[(d, cell)].form == "input":  # the value exported passes its own rule
                    assert accepts(dv, float(values[(d, cell)]) / factor), (d, cell)
            checked += 1
        gpus, utilization = validation_of(typed_cell(catalog, f"{d}.gpus")[0]), \
            validation_of(typed_cell(catalog, f"{d}.utilization")[0])
        assert gpus.type in ("whole", "list") and not accepts(gpus, 0) and not accepts(gpus, 1.5) and accepts(gpus, 8)
        if gpus.type == "list":  # the counts the engine splits the heads over: the one the CLI refuses is refused here
            assert gpus.errorStyle == "stop" and not accepts(gpus, 3), (d, gpus.formula1)
        assert utilization.type == "decimal" and not accepts(utilization, 90) and not accepts(utilization, 0)
        assert accepts(utilization, 0.9) and accepts(utilization, 0.01) and accepts(utilization, 1)
        if prog.cells[(d, "context")].form == "input":
            context = validation_of(typed_cell(catalog, f"{d}.context")[0])
            assert "131072 for 128K" in context.prompt
            assert not accepts(context, 0) and not accepts(context, 1000.5) and accepts(context, 131072)
    assert checked >= 10 * len(deployments(program))


def test_model_inputs_are_validated_from_their_requirements(catalog, program):
    prog, _ = program
    layers = destination(catalog, "qwen3_8b.layers")
    dv = validation_of(layers)
    assert dv.type == "whole" and not accepts(dv, 0) and accepts(dv, 36)


def test_titles_are_formulas_over_the_drop_downs(catalog, program):
    prog, _ = program
    for d in deployments(program):
        title = catalog["Deployments"].cell(destination(catalog, f"{d}.model").row, 2).value
        # the spec's title while the inputs hold their values, else the title they give
        assert title.startswith(f'=IF(AND({d}.model="'), title
        assert f'"{prog.blocks[d].title}", INDEX(all_models_names, MATCH({d}.model, all_models_ids, 0))' in title
        assert f"{d}.gpus" in title and "all_hardware_names" in title
    models = [b for b in program[0].user_blocks() if b.kind == "model"]
    assert catalog.defined_names["all_models_titles"].attr_text == f"'Models'!$B$3:$B${2 + len(models)}"
    assert catalog.defined_names["all_models_names"].attr_text.startswith("'Lists'!$")
    workload = catalog["Workloads"].cell(destination(catalog, "chat_workload.users").row, 2).value
    assert workload.startswith("=IF(AND(chat_workload.prompt_tokens=1000, ") and '"Chat: "&chat_workload.in_words' in workload


def test_results_that_cannot_hold_are_highlighted(catalog, program):
    plan = catalog["Plan"].conditional_formatting
    formulas = [f for cf in plan for rule in cf.rules for f in rule.formula]
    for d in deployments(program):
        # each mark is a condition the prelude states, negated where it cannot hold
        assert {f"NOT({d}.fits)", f"NOT({d}.serves_workload)", f"NOT({d}.meets_ttft)", f"NOT({d}.meets_tpot)"} <= set(formulas)
    room = [c for row in catalog["Plan"].iter_rows() for c in row if str(c.value).endswith(".kv_room_left_bytes_per_gpu/1073741824")]
    assert room and all(c.number_format == "#,##0.0;[Red]-#,##0.0" for c in room)  # short of room: a red figure
    sheet = catalog["Deployments"]
    fits = destination(catalog, f"{deployments(program)[0]}.fits").column_letter
    ranges = {str(cf.sqref): [f for rule in cf.rules for f in rule.formula] for cf in sheet.conditional_formatting}
    last = 2 + len(deployments(program))
    assert ranges[f"{fits}3:{fits}{last}"] == [f"NOT(${fits}3)"]
    users = destination(catalog, f"{deployments(program)[0]}.max_batch").column_letter
    assert ranges[f"{users}3:{users}{last}"] == [f"NOT(${fits}3)"]  # the users that fit: red where it does not fit


def test_intermediate_and_engine_columns_are_grouped_and_hidden(catalog, program):
    ws = catalog["Deployments"]
    d = deployments(program)[0]
    for cell, hidden in (("max_batch", False), ("paged_context", True), ("vllm.num_blocks", True)):
        letter = destination(catalog, f"{d}.{cell}").column_letter
        assert bool(ws.column_dimensions[letter].hidden) == hidden, cell
    for cell in ("cost_per_month", "memory_per_gpu", "model"):  # shown in its twin (n/a, GiB, a name) on its left
        named = destination(catalog, f"{d}.{cell}")
        twin = ws.cell(named.row, named.column - 1)
        assert ws.column_dimensions[named.column_letter].hidden and not ws.column_dimensions[twin.column_letter].hidden
        assert named.coordinate in twin.value, (cell, twin.value)
    visible = [c for c in ws[1] if not ws.column_dimensions[c.column_letter].hidden]
    assert len(visible) <= 40


def test_print_setup(catalog, program):
    from kvdsl.excel.styles import BLOCK_SCALE, MIN_PRINTED_PT

    for ws in catalog.worksheets:
        assert ws.page_setup.orientation == "landscape", ws.title
        if ws.title == "README":  # one page
            assert ws.page_setup.fitToWidth == ws.page_setup.fitToHeight == 1 and ws.sheet_properties.pageSetUpPr.fitToPage
            continue
        assert not ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        scale = ws.page_setup.scale
        assert scale == BLOCK_SCALE or ws.title == "Plan", ws.title
        smallest = min(c.font.sz or 11 for row in ws.iter_rows() for c in row if c.value is not None)
        assert smallest * scale / 100 >= MIN_PRINTED_PT, (ws.title, smallest, scale)
    assert catalog["Deployments"].print_title_rows == "$1:$2" and catalog["Deployments"].print_title_cols == "$A:$B"
    breaks = [b.id for b in catalog["Plan"].row_breaks.brk]
    assert len(breaks) == 1 + len(deployments(program))
    assert catalog["Plan"].print_area == f"'Plan'!$A$1:$G${breaks[-1]}"  # the contents page first


def test_plan_contents_link_to_each_section(catalog, program):
    ws = catalog["Plan"]
    links = [c for c in ws["A"] if c.hyperlink and c.row < 4 + len(deployments(program))]
    assert len(links) == len(deployments(program))
    for link in links:
        row = int(link.hyperlink.location.rsplit("A", 1)[1]) if link.hyperlink.location else \
            int(link.hyperlink.target.rsplit("A", 1)[1])
        assert link.value == f"=A{row}"
        assert ws.cell(row, 1).value.startswith("='Deployments'!$B$")


def test_small_spec_has_one_section(tmp_path):
    wb = openpyxl.load_workbook(export(MISTRAL, tmp_path / "m.xlsx"))
    ws = wb["Plan"]
    assert len([c for c in ws["A"] if c.hyperlink]) == 1
    assert len(ws._charts) == 1 and len(ws._charts[0].series) == 5


HARDWARE_UNITS = {"memory": (2**30, "GiB"), "cuda_memory": (2**30, "GiB"), "bandwidth": (10**9, "GB/s"),
                  "interconnect_bandwidth": (10**9, "GB/s"), "flops_bf16": (10**12, "TFLOP/s"),
                  "flops_fp8": (10**12, "TFLOP/s"), "flops_fp4": (10**12, "TFLOP/s"),
                  "price_per_hour": (Fraction(1, 3600), "USD/h")}


def test_hardware_is_typed_in_human_units_beside_its_named_cells(catalog, program):
    prog, values = program
    ws = catalog["Hardware"]
    checked = 0
    for info in prog.user_blocks():
        if info.kind != "hardware":
            continue
        for cell, (factor, unit) in HARDWARE_UNITS.items():
            rc = prog.cells[(info.name, cell)]
            named_cell = destination(catalog, f"{info.name}.{cell}")
            typed, found = typed_cell(catalog, f"{info.name}.{cell}")
            beside = ws.cell(named_cell.row, named_cell.column - 1)
            assert unit in str(ws.cell(2, beside.column).value) and unit.split("/")[0] in beside.number_format.replace(
                '"$"', "USD"), (info.name, cell, beside.number_format)
            if rc.form != "input":  # a rule (cuda_memory = memory): shown converted, not typed
                assert typed is named_cell and beside.value == f"={named_cell.coordinate}" + (
                    f"/{factor}" if factor > 1 else f"*{1 / factor}")
                continue
            assert typed is beside and found == factor, (info.name, cell, named_cell.value)
            assert named_cell.value == f"={beside.coordinate}" + (f"*{factor}" if factor > 1 else f"/{1 / factor}")
            assert beside.fill.fgColor.rgb.endswith("FFF2CC") and not named_cell.fill.fill_type
            assert float(Fraction(beside.value)) == pytest.approx(float(values[(info.name, cell)] / factor), rel=1e-12)
            dv = validation_of(beside)
            assert dv.showErrorMessage and unit in dv.prompt
            assert accepts(dv, beside.value) and not accepts(dv, -1)
            checked += 1
    assert checked >= 6 * 16, checked
    l4 = typed_cell(catalog, "_l4.price_per_hour")[0]
    assert l4.value == 0.8 and l4.number_format.startswith('"$"')  # USD per hour, not per second


def test_plan_price_reads_the_hourly_price(catalog, program):
    prices = [c for c in catalog["Plan"]["B"] if isinstance(c.value, str) and "price_per_hour" in c.value]
    assert len(prices) == len(deployments(program))
    for price in prices:
        assert price.value.endswith("*3600") and price.number_format == '"$"#,##0.00'


def test_model_counts_have_separators_and_bytes_a_gib_column(catalog, program):
    prog, _ = program
    for cell in ("params", "layers", "hidden_size", "kv_elements_per_token"):
        assert destination(catalog, f"qwen3_8b.{cell}").number_format.startswith("#,##0"), cell
    weights = destination(catalog, "qwen3_8b.weights_bytes")
    beside = weights.parent.cell(weights.row, weights.column - 1)
    assert beside.value == f"={weights.coordinate}/{2**30}" and "GiB" in beside.number_format
    ratio = destination(catalog, "qwen3_8b.mha_reduction")  # a quotient: may stop being whole
    assert ratio.number_format != "#,##0"


def test_summary_fits_reads_yes_no(catalog, program):
    ws = catalog["Summary"]
    column = [c.value for c in ws[1]].index("fits") + 1
    yes_no = [cf.sqref for cf in ws.conditional_formatting
              if any(r.dxf is not None and r.dxf.numFmt is not None and r.dxf.numFmt.formatCode == YES_NO for r in cf.rules)]
    for row in range(2, 2 + len(deployments(program))):
        cell = ws.cell(row, column)
        assert cell.value.endswith(".fits") and cell.number_format == "General"
        assert any(cell.coordinate in sqref for sqref in yes_no), cell.coordinate
