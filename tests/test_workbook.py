"""`kvdsl export`: the workbook's layout, names and formulas, and its values after LibreOffice recalculates it.

The contract: for every block and every number or boolean `kvdsl eval --json`
reports, the defined name `block.cell` (or `_block.cell`, see `excel_name`)
points at one cell whose recalculated value is the evaluated one.  All the
workbooks LibreOffice recalculates are converted in one soffice run (the
module fixture `recalculated`).
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from fractions import Fraction
from pathlib import Path

import openpyxl
from click.testing import CliRunner
import pytest

from kvdsl.api import build_program, evaluate_paths, parse_setting
from kvdsl.cli import main
from kvdsl.evaluate import evaluate
from kvdsl.search import depends_on
from kvdsl.excel.cells import WHAT_IF_CONTEXTS
from kvdsl.excel.names import excel_name
from workbook_helpers import (CATALOG, ROOT, cli, compare_numeric, shared_catalog_export, destination, error_cells, eval_json, export,
                              libreoffice, named, recalculate, same_value, set_typed, typed_cell)

SHEETS = ["Plan", "Deployments", "Models", "Hardware", "Workloads", "README", "Summary", "Comparison", "What-if", "Formats",
          "Engines", "Lists"]
BLOCK_SHEETS = {"model": "Models", "hardware": "Hardware", "deployment": "Deployments", "format": "Formats", "engine": "Engines",
                "workload": "Workloads"}

# Input changes made in the workbook (the cell a defined name points at) and
# passed to `kvdsl eval --set` as NAME=VALUE.  All of them go into one copy of
# the catalog, so LibreOffice recalculates the catalog twice, not once per change;
# each case changes cells of its own, and `test_changes_actually_change_results`
# checks that every case moved the cell it should.
CHANGES = {
    "context": [("llama_3_1_70b_h100x16.context", 65536)],
    "model_switch": [("qwen3_32b.kv_heads", 4), ("llama_3_1_70b_h100x4_fp8.model", "qwen3_32b")],
    "gpus": [("llama_3_1_70b_h100x4_fp8.gpus", 2)],
    "kv_dtype": [("deepseek_v3_h200x8.kv_dtype", "q4_0")],
    "hardware": [("mistral_7b_l4.hardware", "h100_sxm")],
    "engine": [("qwen3_8b_rtx4090.engine", "vllm"), ("jamba_a100x2.engine", "trtllm")],
    "workload": [("mamba_2_8b_l4.workload", "rag_workload"), ("rag_workload.prompt_tokens", 4000)],
}

ALL_CHANGES = [change for changes in CHANGES.values() for change in changes]

# The engine-log reproductions have a catalog of their own: changes of their engines and engine inputs
ENGINE_LOGS = ROOT / "specs" / "engine_logs" / "catalog.kvspec"
ENGINE_LOG_CHANGES = {
    "engine": [("v22_gpt_oss_120b.engine", "sglang"), ("v23_qwen3_next_80b_h200x2.engine", "trtllm")],
    "engine_inputs": [("v25_nemotron_3_nano_4b_gb10.kv_cache_memory_bytes", 8 * 2**30),
                      ("v20_deepseek_v2_lite_l4x4.pipeline_stages", 1), ("v10_qwen3_8b_rtx4090.vllm.version", 0.19)],
}
ALL_ENGINE_LOG_CHANGES = [change for changes in ENGINE_LOG_CHANGES.values() for change in changes]

# the one-deployment workbook: its workload's prompt, typed on its Plan page
MISTRAL = ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec"
PROMPT = [("no_workload.prompt_tokens", 2000)]

REQUIRED = "layers = {layers}\n    heads = 4\n    head_dim = 8\n    params = 1e9\n"

SPECS = {
    # titles and texts that a spreadsheet would read as formulas
    "titles": f"""
        model weird "=SUM(1,2)" {{
            source = "-x"
            {REQUIRED.format(layers=2)}
        }}
        """,
    # block names that read as cell references get a leading underscore
    "refnames": f"""
        model c "Model c" {{
            {REQUIRED.format(layers=3)}
            kv_heads = 2
        }}
        hardware h100 "H100-like" {{
            memory = 80 GiB
            bandwidth = 3.35 TB/s
        }}
        deployment tp2 "c on 2 x h100" {{
            model = c
            hardware = h100
            gpus = 2
            context = 8K
            batch = 3
        }}
        deployment r1c1 "c on 1 x h100" {{
            model = c
            hardware = h100
        }}
        """,
    # a `?` cell, with the catalog's model and hardware imported by absolute path
    "unknown": f"""
        import "{(ROOT / 'specs/models/qwen3_8b.kvspec').as_posix()}"
        import "{(ROOT / 'specs/hardware/h100_sxm.kvspec').as_posix()}"
        import "{(ROOT / 'specs/models/gpt_oss_120b.kvspec').as_posix()}"
        import "{(ROOT / 'specs/models/llama_3_1_70b.kvspec').as_posix()}"

        deployment solve_batch "Qwen3-8B on 1 x H100, batch solved" {{
            model = qwen3_8b
            hardware = h100_sxm
            context = 32K
            batch = ?
        }}

        # paged in blocks of 16: the answer is a whole number of blocks
        deployment solve_context "gpt-oss-120b on 1 x H100, context solved" {{
            model = gpt_oss_120b
            hardware = h100_sxm
            batch = 8
            context = ?
        }}

        # 8 KV heads: past 8 GPUs they are replicated
        deployment solve_gpus "Llama-3.1-70B, GPUs solved" {{
            model = llama_3_1_70b
            hardware = h100_sxm
            batch = 4
            context = 128K
            gpus = ?
        }}
        """,
    # `h100` is written `_h100` in Excel, which another block already is
    "clash_underscore": f"""
        model h100 "A" {{
            {REQUIRED.format(layers=2)}
        }}
        model _h100 "B" {{
            {REQUIRED.format(layers=4)}
        }}
        """,
    # defined names are case-insensitive in Excel and LibreOffice
    "clash_case": f"""
        model chat "A" {{
            {REQUIRED.format(layers=2)}
        }}
        model Chat "B" {{
            {REQUIRED.format(layers=4)}
        }}
        """,
    # a model cell named `id` must not take over the range that lookups MATCH against
    "id_cell": f"""
        model m "A" {{
            {REQUIRED.format(layers=2)}
            let id = 7
        }}
        model n "B" {{
            {REQUIRED.format(layers=4)}
        }}
        hardware hw "H" {{
            memory = 80 GiB
            bandwidth = 3.35 TB/s
        }}
        deployment d "n on hw" {{
            model = n
            hardware = hw
        }}
            """,
}

# ---- fixtures ------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("workbook")


@pytest.fixture(scope="module")
def catalog_export(tmp_path_factory):
    """`kvdsl export` of the catalog into an empty directory: (what it printed, the workbook's path)."""
    return shared_catalog_export(tmp_path_factory)


@pytest.fixture(scope="module")
def catalog_xlsx(catalog_export) -> Path:
    result, out = catalog_export
    assert result.exit_code == 0, (result.output, result.exception)
    return out


@pytest.fixture(scope="module")
def catalog_wb(catalog_xlsx):
    return openpyxl.load_workbook(catalog_xlsx)


@pytest.fixture(scope="module")
def catalog_program():
    return evaluate_paths([str(CATALOG)])


@pytest.fixture(scope="module")
def catalog_json() -> dict:
    return eval_json(CATALOG)


def spec_path(workdir: Path, key: str) -> Path:
    path = workdir / "specs" / f"{key}.kvspec"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(SPECS[key]), encoding="utf-8")
    return path


def small_export(workdir: Path, key: str) -> Path:
    out = workdir / "small" / f"{key}.xlsx"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        export(spec_path(workdir, key), out)
    return out


class Recalculated:
    """Every workbook of this module, recalculated by one soffice run; loaded lazily."""

    def __init__(self, paths: dict, failures: dict):
        self.paths, self.failures, self._loaded = paths, failures, {}

    def __getitem__(self, key):
        if key in self.failures:
            raise self.failures[key]
        if key not in self._loaded:
            self._loaded[key] = openpyxl.load_workbook(self.paths[key], data_only=True)
        return self._loaded[key]


def changed_copy(source: Path, changes: list, path: Path) -> Path:
    """A copy of the workbook `source` with each (name, value) of `changes` typed where a reader types it."""
    wb = openpyxl.load_workbook(source)
    for name, value in changes:
        set_typed(wb, name, value)
    path.parent.mkdir(exist_ok=True)
    wb.save(path)
    return path


@pytest.fixture(scope="module")
def recalculated(workdir, catalog_xlsx) -> Recalculated:
    sources, failures = {"catalog": catalog_xlsx}, {}
    sources["changed"] = changed_copy(catalog_xlsx, ALL_CHANGES, workdir / "changed" / "changed.xlsx")
    (workdir / "engine_logs").mkdir(exist_ok=True)
    sources["engine_logs"] = export(ENGINE_LOGS, workdir / "engine_logs" / "engine_logs.xlsx")
    sources["engine_logs_changed"] = changed_copy(sources["engine_logs"], ALL_ENGINE_LOG_CHANGES,
                                                  workdir / "changed" / "engine_logs_changed.xlsx")
    (workdir / "mistral").mkdir(exist_ok=True)
    sources["mistral"] = export(MISTRAL, workdir / "mistral" / "mistral.xlsx")
    sources["mistral_prompt"] = changed_copy(sources["mistral"], PROMPT, workdir / "changed" / "mistral_prompt.xlsx")
    for key in SPECS:
        if key.startswith("clash_"):
            continue
        try:
            sources[key] = small_export(workdir, key)
        except AssertionError as exc:  # reported by the test that uses it
            failures[key] = exc
    outs = recalculate(list(sources.values()), workdir / "recalculated", workdir / "lo-profile")
    return Recalculated(dict(zip(sources, outs)), failures)


# ---- 2. the contract: every evaluated number, recalculated --------------------


@libreoffice
def test_every_named_cell_recalculates_to_eval(recalculated, catalog_json):
    count, bad = compare_numeric(recalculated["catalog"], catalog_json)
    assert not bad, f"{len(bad)} of {count} cells differ, e.g. {bad[:15]}"
    assert count > 900


# ---- 3. change inputs in the workbook, compare with eval --set ------------------


@libreoffice
@pytest.mark.parametrize("key, spec, changes, least", [("changed", CATALOG, ALL_CHANGES, 900),
                                                       ("engine_logs_changed", ENGINE_LOGS, ALL_ENGINE_LOG_CHANGES, 900)])
def test_changed_inputs_recalculate_to_eval_with_set(recalculated, key, spec, changes, least):
    settings = [f"{name}={str(value).lower() if isinstance(value, bool) else value}" for name, value in changes]
    blocks = eval_json(spec, settings)
    wb = recalculated[key]
    for name, value in changes:
        assert named(wb, name) == value
    count, bad = compare_numeric(wb, blocks)
    assert not bad, f"--set {settings}: {len(bad)} of {count} cells differ, e.g. {bad[:15]}"
    assert count > least
    assert error_cells(wb) == []


@libreoffice
def test_the_prompt_typed_on_the_plan_moves_speed_and_cost_as_eval_set_does(recalculated, workdir):
    """The workload's prompt tokens, typed on the Plan page: TTFT, TPOT and both costs follow, in LibreOffice and
    in the `formulas` package, equal to `eval --set`."""
    wb = openpyxl.load_workbook(workdir / "mistral" / "mistral.xlsx")
    typed, _ = typed_cell(wb, PROMPT[0][0])
    assert typed.parent.title == "Plan"
    before = eval_json(MISTRAL)["mistral_7b_l4"]["cells"]
    after = eval_json(MISTRAL, [f"{name}={value}" for name, value in PROMPT])
    count, bad = compare_numeric(recalculated["mistral_prompt"], after)
    assert not bad and count > 500, bad[:10]
    engines = [recalculated["mistral_prompt"]]
    if importlib.util.find_spec("formulas"):
        from second_engine import SecondEngine

        book = SecondEngine(wb)
        book.set(f"'Plan'!{typed.coordinate}", PROMPT[0][1])
        engines.append(book)
    for cell in ("ttft_seconds", "tpot_seconds", "cost_per_million_tokens", "cost_per_million_output_tokens"):
        want = after["mistral_7b_l4"]["cells"][cell]["value"]
        # (the time per token, and so the answer's cost, stay: a step reads the weights and a 4,096-token window
        # whatever the prompt, and the prompt work it carries is under a token)
        assert (want != before[cell]["value"]) is (cell in ("ttft_seconds", "cost_per_million_tokens")), cell
        for engine in engines:
            assert same_value(want, named(engine, f"mistral_7b_l4.{cell}") if engine is engines[0]
                              else engine.named(f"mistral_7b_l4.{cell}")), cell


@libreoffice
def test_the_engine_log_catalog_recalculates_to_eval(recalculated):
    """The engine-log reproductions, exported from their own catalog, equal `eval` too."""
    count, bad = compare_numeric(recalculated["engine_logs"], eval_json(ENGINE_LOGS))
    assert not bad, f"{len(bad)} of {count} cells differ, e.g. {bad[:15]}"
    assert count > 900
    assert error_cells(recalculated["engine_logs"]) == []


@libreoffice
def test_changes_actually_change_results(recalculated, catalog_json):
    """The changed workbooks are not just the original: the changed block's results moved."""
    moved = {
        "context": "llama_3_1_70b_h100x16.max_batch",
        "model_switch": "llama_3_1_70b_h100x4_fp8.weights_bytes",
        "gpus": "llama_3_1_70b_h100x4_fp8.kv_budget_bytes",
        "kv_dtype": "deepseek_v3_h200x8.kv_bytes_per_element",
        "hardware": "mistral_7b_l4.memory_per_gpu",
        "engine": "qwen3_8b_rtx4090.engine_kv_cache_tokens",
        "workload": "mamba_2_8b_l4.ttft_seconds",
    }
    for case, name in moved.items():
        block, cell = name.split(".")
        before = catalog_json[block]["cells"][cell]["value"]
        assert named(recalculated["changed"], name) != before, case
    engine_logs = eval_json(ENGINE_LOGS)
    for case, name in {"engine": "v22_gpt_oss_120b.engine_kv_cache_tokens",
                       "engine_inputs": "v25_nemotron_3_nano_4b_gb10.engine_num_blocks"}.items():
        block, cell = name.split(".")
        assert named(recalculated["engine_logs_changed"], name) != engine_logs[block]["cells"][cell]["value"], case


@libreoffice
def test_the_plan_sheet_and_eval_print_the_same_verdicts(recalculated, catalog_wb, catalog_json):
    from test_answers import plan_verdicts

    shown = plan_verdicts(catalog_wb, recalculated["catalog"])
    deployments = {b: info for b, info in catalog_json.items() if info["kind"] == "deployment"}
    assert set(shown) == set(deployments)
    for block, info in deployments.items():
        assert shown[block] == info["cells"]["verdict"]["value"], block


@libreoffice
def test_libreoffice_and_the_formulas_package_agree_on_every_formula(recalculated, tmp_path_factory):
    """Every formula cell of every sheet, as LibreOffice and as `formulas` (tests/second_engine.py) compute it."""
    pytest.importorskip("formulas")
    from second_engine import shared_catalog_values

    _, computed = shared_catalog_values(tmp_path_factory)
    wb = recalculated["catalog"]
    sheets = {ws.title.upper(): ws for ws in wb.worksheets}
    bad = []
    for (sheet, coordinate), theirs in computed.items():
        ours = sheets[sheet][coordinate].value
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (ours, theirs))
        if not (same_value(float(ours), theirs) if numbers else ours == theirs or {ours, theirs} <= {None, ""}):
            bad.append((sheet, coordinate, ours, theirs))
    assert not bad, f"{len(bad)} of {len(computed)} formula cells differ (LibreOffice, formulas), e.g. {bad[:10]}"
    assert len(computed) > 8000


# ---- 4. no error values ----------------------------------------------------------


@libreoffice
def test_no_error_values_anywhere(recalculated):
    assert error_cells(recalculated["catalog"]) == []


# ---- 5. structure (no LibreOffice) ------------------------------------------------


def test_sheets(catalog_wb):
    assert catalog_wb.sheetnames == SHEETS


def workbook_blocks(program):
    return [b for b in program.blocks.values() if (not b.prelude) or b.kind in ("format", "engine", "workload")]


def test_results_are_formulas_and_inputs_are_not(catalog_wb, catalog_program):
    program, values = catalog_program
    checked = {"input": 0, "formula": 0, "static": 0}
    for info in workbook_blocks(program):
        for cell in info.cells:
            rc, value = program.cells[(info.name, cell)], values[(info.name, cell)]
            target = destination(catalog_wb, f"{info.name}.{cell}")
            assert target.parent.title == BLOCK_SHEETS[info.kind]
            where = f"{info.name}.{cell} ({target.coordinate}: {target.value!r})"
            typed, factor = typed_cell(catalog_wb, f"{info.name}.{cell}")
            if rc.form == "input" and rc.scope and rc.origin == "engine":  # the engine's setting, read from its row
                assert target.value == f"={rc.scope}.{rc.local_name}", where
            elif rc.form == "input":
                if typed is not target:  # typed on the Plan sheet, or beside the named cell, in human units
                    assert typed.parent.title in ("Plan", BLOCK_SHEETS[info.kind]), where
                    assert typed.parent.title == "Plan" or info.kind != "deployment", where
                    assert target.data_type == "f", where
                    target = typed
                    value = value / factor if factor != 1 else value
                assert isinstance(target.value, (int, float)) and target.data_type in ("n", "b"), where
                assert same_value(value if isinstance(value, bool) else float(value), target.value), where
                assert (target.data_type == "b") == isinstance(value, bool), where
                checked["input"] += 1
            elif rc.form == "unknown" and not isinstance(target.value, str):  # found by search: no formula follows
                assert same_value(float(value), target.value) and "does not follow" in target.comment.text, where
                checked["static"] += 1
            elif value is not None and not isinstance(value, str):
                assert isinstance(target.value, str) and target.value.startswith("="), where
                assert target.data_type == "f", where
                checked["formula"] += 1
    assert checked["input"] > 300 and checked["formula"] > 600, checked


def test_each_deployment_input_is_typed_in_one_place(catalog_wb, catalog_program):
    """A deployment's typed cell lives on the Plan sheet; its named cell reads it, in base units."""
    program, values = catalog_program
    deployments = [b.name for b in program.user_blocks() if b.kind == "deployment"]
    typed = {}
    for d in deployments:
        for cell in ("model", "hardware", "gpus", "replicas", "batch", "utilization", "reserve_bytes"):
            if program.cells[(d, cell)].form == "unknown":  # solved: a formula, typed nowhere
                continue
            cell_on_plan, factor = typed_cell(catalog_wb, f"{d}.{cell}")
            assert cell_on_plan.parent.title == "Plan", (d, cell)
            assert destination(catalog_wb, f"{d}.{cell}").parent.title == "Deployments"
            want = 2**30 if cell == "reserve_bytes" else 1
            assert factor == want or isinstance(factor, dict) and cell in ("model", "hardware"), (d, cell)
            typed.setdefault(cell_on_plan.coordinate, []).append((d, cell))
    assert all(len(v) == 1 for v in typed.values())  # no Plan cell is shared
    # utilization is a percentage, reserve in GiB
    d = deployments[0]
    assert typed_cell(catalog_wb, f"{d}.utilization")[0].number_format == "0%"
    reserve = typed_cell(catalog_wb, f"{d}.reserve_bytes")[0]
    assert reserve.parent.cell(reserve.row, reserve.column + 1).value == "GiB"  # the unit beside the number


def test_formulas_read_through_defined_names(catalog_wb, catalog_program):
    program, _ = catalog_program
    assert "qwen3_8b.full_elements_per_token" in named(catalog_wb, "qwen3_8b.kv_elements_per_token")
    deployments = [b.name for b in program.user_blocks() if b.kind == "deployment"]
    assert len(deployments) >= 9
    for d in deployments:
        heads = named(catalog_wb, f"{d}.kv_heads_per_gpu")
        assert f"INDEX(all_models.kv_heads, MATCH({d}.model, all_models_ids, 0))" in heads
        assert f"INDEX(all_hardware.memory, MATCH({d}.hardware, all_hardware_ids, 0))" in named(catalog_wb, f"{d}.memory_per_gpu")
    # the column names are the block rows of their sheet
    assert catalog_wb.defined_names["all_models_ids"].attr_text == "'Models'!$A$3:$A$39"
    assert catalog_wb.defined_names["all_formats_ids"].attr_text.startswith("'Formats'!$A$3:$A$")


def test_calculation_and_frozen_panes(catalog_wb):
    assert catalog_wb.calculation.fullCalcOnLoad is True
    for sheet in ("Models", "Hardware", "Deployments", "Formats"):
        assert catalog_wb[sheet].freeze_panes == "C3", sheet
    for sheet in ("Comparison", "Summary", "What-if"):
        assert catalog_wb[sheet].freeze_panes == "B2", sheet


def _list_validations(ws) -> dict:
    """formula1 -> the list validations with it."""
    out = {}
    for dv in ws.data_validations.dataValidation:
        if dv.type == "list":
            out.setdefault(dv.formula1, []).append(dv)
    return out


def test_drop_downs(catalog_wb, catalog_program):
    program, _ = catalog_program
    wanted = {("model", "kv_dtype"): "=all_formats_names", ("deployment", "model"): "=all_models_names",
              ("deployment", "hardware"): "=all_hardware_names", ("deployment", "kv_dtype"): "=all_formats_names",
              ("deployment", "engine"): "=all_engines_names"}
    for (kind, cell), formula in wanted.items():
        blocks = [b.name for b in program.user_blocks() if b.kind == kind]
        assert blocks
        for block in blocks:
            target = typed_cell(catalog_wb, f"{block}.{cell}")[0]
            validations = _list_validations(target.parent).get(formula, [])
            assert any(target.coordinate in dv.sqref for dv in validations), f"no {formula} drop-down on {block}.{cell}"


def test_formula_cells_carry_their_source_line(catalog_wb, catalog_program):
    program, _ = catalog_program
    checked = 0
    for info in workbook_blocks(program):
        for cell in info.cells:
            target = destination(catalog_wb, f"{info.name}.{cell}")
            if not (isinstance(target.value, str) and target.value.startswith("=")):
                continue
            rc = program.cells[(info.name, cell)]
            assert target.comment is not None, f"{info.name}.{cell} has no comment"
            first = target.comment.text.splitlines()[0]
            assert re.fullmatch(r".+\.kvspec:\d+", first), first
            assert first == f"{rc.span.path}:{rc.span.line}"
            checked += 1
    assert checked > 600


def test_excel_name_rule():
    for name in ("h100.memory", "tp2.x", "r.x", "c.x", "r1c1.x", "R.x", "C1.x", "rc.x", "a1.x", "xfd1048576.x",
                 "true.x", "FALSE.x"):
        assert excel_name(name) == "_" + name, name
    for name in ("qwen3_8b.layers", "h100_sxm.memory", "chat.x", "rtx_4090.memory", "llama_3_1_70b_h100x16.context"):
        assert excel_name(name) == name, name


def test_titles_that_look_like_formulas_are_text(workdir):
    wb = openpyxl.load_workbook(small_export(workdir, "titles"))
    ws = wb["Models"]
    row = destination(wb, "weird.layers").row
    title, source = ws.cell(row, 2), destination(wb, "weird.source")
    assert (title.value, title.data_type) == ("=SUM(1,2)", "s")
    assert (source.value, source.data_type) == ("-x", "s")
    comparison = wb["Comparison"]["A2"]
    assert (comparison.value, comparison.data_type) == ("=SUM(1,2)", "s")


def test_what_if_has_line_charts(catalog_wb):
    from kvdsl.excel.charts import SERIES_PER_CHART

    charts = catalog_wb["What-if"]._charts
    assert len(charts) > 1 and {type(c).__name__ for c in charts} == {"LineChart"}
    assert all(1 <= len(c.series) <= SERIES_PER_CHART for c in charts)
    assert sum(len(c.series) for c in charts) == len(catalog_wb["What-if"][1]) - 1


# ---- 5. LibreOffice: texts, names that read as cell references -----------------


@libreoffice
def test_titles_read_back_as_text_after_libreoffice(recalculated):
    wb = recalculated["titles"]
    row = destination(wb, "weird.layers").row
    assert wb["Models"].cell(row, 2).value == "=SUM(1,2)"
    assert named(wb, "weird.source") == "-x"
    assert wb["Comparison"]["A2"].value == "=SUM(1,2)"


@libreoffice
def test_blocks_named_like_cell_references_recalculate(workdir, recalculated):
    wb = recalculated["refnames"]
    for name in ("_tp2.max_batch", "_h100.memory", "_c.layers", "_r1c1.fits"):
        assert name in wb.defined_names, name
    count, bad = compare_numeric(wb, eval_json(spec_path(workdir, "refnames")))
    assert not bad, bad[:15]
    assert count > 90
    assert error_cells(wb) == []


# ---- 5/bugs: names that collide ---------------------------------------------------


def _name_owners(workdir, key):
    """(defined names of the workbook, {lower-cased name: [block.cell...]})."""
    program = build_program([str(spec_path(workdir, key))])
    owners = {}
    for info in workbook_blocks(program):
        for cell in info.cells:
            owners.setdefault(excel_name(f"{info.name}.{cell}").lower(), []).append(f"{info.name}.{cell}")
    return owners


@pytest.mark.parametrize("key", ["refnames", "id_cell"])
def test_every_cell_has_its_own_defined_name(workdir, key):
    """Excel compares names case-insensitively: no two cells may share one."""
    shared = {name: cells for name, cells in _name_owners(workdir, key).items() if len(cells) > 1}
    assert not shared, list(shared.items())[:5]
    wb = openpyxl.load_workbook(small_export(workdir, key))
    lowered = [n.lower() for n in wb.defined_names]
    assert len(lowered) == len(set(lowered))


@pytest.mark.parametrize("key, blocks", [("clash_underscore", ("h100", "_h100")), ("clash_case", ("chat", "Chat"))])
def test_clashing_block_names_are_refused(workdir, key, blocks, tmp_path):
    """Blocks that Excel would give the same names are an error naming both, and no file is written."""
    out = tmp_path / "clash.xlsx"
    result = CliRunner().invoke(main, ["export", str(spec_path(workdir, key)), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "would share defined names in Excel" in result.stderr
    assert all(f"`{b}`" in result.stderr for b in blocks)
    assert not out.exists()


def test_block_name_column_keeps_its_name_beside_an_id_cell(workdir):
    wb = openpyxl.load_workbook(small_export(workdir, "id_cell"))
    assert wb.defined_names["all_models_ids"].attr_text == "'Models'!$A$3:$A$4"
    assert "all_models.id" in wb.defined_names


@libreoffice
def test_id_cell_recalculates_to_eval(workdir, recalculated):
    wb = recalculated["id_cell"]
    count, bad = compare_numeric(wb, eval_json(spec_path(workdir, "id_cell")))
    assert not bad, f"{len(bad)} of {count} differ, e.g. {bad[:8]}"
    assert error_cells(wb) == []


# ---- 6. the One Table and What-if ---------------------------------------------------


@libreoffice
def test_comparison_seed_figures(recalculated):
    ws = recalculated["catalog"]["Comparison"]
    rows = {row[0]: row for row in ws.iter_rows(min_row=2, values_only=True)}
    qwen = rows["Qwen3-8B"]
    assert qwen[1] == "GQA"
    assert qwen[2] == 73728
    assert qwen[3] == pytest.approx(4.0, rel=1e-12)
    assert qwen[4] == 32768 and qwen[5] == "FP16"  # the format's name, not its id
    assert qwen[6] == pytest.approx(4.5, rel=1e-12)
    assert f"{qwen[6]:.2f} GiB" == "4.50 GiB"
    assert len(rows) == 37


@libreoffice
def test_what_if_matches_eval_with_context_set(recalculated, catalog_program):
    program, _ = catalog_program
    ws = recalculated["catalog"]["What-if"]
    deployments = [b.name for b in program.user_blocks() if b.kind == "deployment"]
    assert len(deployments) >= 3
    assert [ws.cell(1, j).value for j in range(2, 2 + len(deployments))] == [program.blocks[d].title for d in deployments]
    # a fixed batch where a spec solves it (`?`): max_batch does not depend on batch
    settings = [parse_setting(f"{d}.batch=1") for d in deployments if program.cells[(d, "batch")].form == "unknown"]
    fixed, base = evaluate_paths([str(CATALOG)], settings)
    # the catalog is evaluated again at each context as `--set d.context=N` would:
    # every cell that depends on a context is computed anew, the rest stand
    affected = set().union(*(depends_on(fixed, (d, "context")) for d in deployments))
    stable = {key: value for key, value in base.items() if key not in affected}
    bad, checked, zeros = [], 0, 0
    for i, tokens in enumerate(WHAT_IF_CONTEXTS, start=2):
        assert ws.cell(i, 1).value == tokens
        values = evaluate(fixed, known={**stable, **{(d, "context"): Fraction(tokens) for d in deployments}})
        for j, d in enumerate(deployments, start=2):
            limit = values[(values[(d, "model")], "context_limit")]
            want = values[(d, "max_batch")]
            zeros += tokens > limit and want == 0
            got = ws.cell(i, j).value
            checked += 1
            if not same_value(float(want), got):
                bad.append((d, tokens, want, got))
    assert not bad, bad[:15]
    assert checked == len(deployments) * len(WHAT_IF_CONTEXTS)
    assert zeros > 0  # some rows are past a model's context limit


# ---- 7. the export command -------------------------------------------------------------


def test_export_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "book.xlsx"
    out.write_bytes(b"keep me")
    result = cli("export", CATALOG, "-o", out)
    assert result.exit_code == 2, result.output
    assert "--force" in result.output
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.xlsx"]


def test_export_prints_what_it_wrote_and_leaves_no_temp_file(catalog_export, catalog_wb, catalog_program):
    result, out = catalog_export
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.parent.iterdir()) == ["catalog.xlsx"]
    match = re.fullmatch(r"wrote (.+): (\d+) blocks, ([\d,]+) formulas, ([\d,]+) defined names; sheets: (.+)\n",
                         result.stdout)
    assert match, result.stdout
    wb = catalog_wb
    program, _ = catalog_program
    formulas = sum(1 for ws in wb.worksheets for row in ws.iter_rows() for c in row if c.data_type == "f")
    assert match.group(1) == str(out)
    assert int(match.group(2)) == len(workbook_blocks(program)) == 95  # with the three prelude workloads
    assert int(match.group(3).replace(",", "")) == formulas
    assert int(match.group(4).replace(",", "")) == len(wb.defined_names)
    assert match.group(5).split(", ") == SHEETS


def test_export_force_overwrites_atomically(workdir, tmp_path):
    out = tmp_path / "book.xlsx"
    out.write_bytes(b"an older workbook")
    result = cli("export", spec_path(workdir, "titles"), "-o", out, "--force")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.xlsx"]
    assert "Models" in openpyxl.load_workbook(out).sheetnames


def test_export_failure_leaves_no_temp_file(workdir, tmp_path, monkeypatch):
    spec = spec_path(workdir, "titles")

    def fail(self, filename):
        filename.write(b"partial")
        raise OSError("disk full")

    def fail_writing(self):
        self._archive.fp.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(openpyxl.Workbook, "save", fail)
    monkeypatch.setattr(openpyxl.writer.excel.ExcelWriter, "save", fail_writing)  # the export writes through it
    out = tmp_path / "book.xlsx"
    result = cli("export", spec, "-o", out)
    assert result.exit_code == 2, result.output
    assert "cannot write" in result.stderr and "disk full" in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []
    out.write_bytes(b"keep me")
    result = cli("export", spec, "-o", out, "--force")
    assert result.exit_code != 0
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.xlsx"]


def test_unknown_cell_is_exported_as_a_formula(workdir):
    wb = openpyxl.load_workbook(small_export(workdir, "unknown"))
    batch = destination(wb, "solve_batch.batch")
    assert batch.data_type == "f" and batch.value.startswith("="), batch.value


@libreoffice
def test_unknown_cell_recalculates_to_eval(workdir, recalculated):
    blocks = eval_json(spec_path(workdir, "unknown"))
    want = blocks["solve_batch"]["cells"]["batch"]["value"]
    assert isinstance(want, int) and want > 0
    wb = recalculated["unknown"]
    assert same_value(want, named(wb, "solve_batch.batch"))
    for block, cell, expected in (("solve_context", "context", 40000), ("solve_gpus", "gpus", 5)):
        assert blocks[block]["cells"][cell]["value"] == expected
        assert same_value(expected, named(wb, f"{block}.{cell}"))
    count, bad = compare_numeric(wb, blocks)
    assert not bad, bad[:8]
    count, bad = compare_numeric(wb, blocks)
    assert not bad, bad[:15]
    assert count > 60


def test_a_solved_cell_the_formula_cannot_follow_is_written_as_its_number(tmp_path):
    """gpus = ? for 16 x 128K on Llama-3.1-70B: the relaxed closed form says 7, the exact answer is 8
    (at 7 GPUs each holds ceil(8 / 7) = 2 KV heads); the export writes 8, not the formula, with a note saying why."""
    import openpyxl

    spec = tmp_path / "gpus.kvspec"
    spec.write_text(textwrap.dedent(f"""
        import "{(ROOT / 'specs/models/llama_3_1_70b.kvspec').as_posix()}"
        import "{(ROOT / 'specs/hardware/h100_sxm.kvspec').as_posix()}"
        deployment g "gpus" {{
            model = llama_3_1_70b
            hardware = h100_sxm
            batch = 16
            context = 128K
            kv_dtype = fp8
            gpus = ?
        }}
        """))
    assert evaluate_paths([str(spec)])[1][("g", "gpus")] == 8
    out = tmp_path / "gpus.xlsx"
    result = CliRunner().invoke(main, ["export", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    workbook = openpyxl.load_workbook(out)
    sheet, ref = next(iter(workbook.defined_names["g.gpus"].destinations))
    cell = workbook[sheet][ref.replace("$", "")]
    assert cell.value == 8
    assert "its closed form gives 7 at the spec's values, the exact answer is 8" in cell.comment.text
    assert "does not follow the other inputs" in cell.comment.text


@libreoffice
def test_summary_shows_each_deployments_engine_figures(recalculated):
    ws = recalculated["engine_logs"]["Summary"]
    headers = [c.value for c in ws[1]]
    rows = {row[0]: dict(zip(headers, row)) for row in ws.iter_rows(min_row=2, values_only=True)}
    block = "v23_qwen3_next_80b_h200x2"
    blocks = eval_json(ENGINE_LOGS)
    row = rows[blocks[block]["title"]]
    cells = blocks[block]["cells"]
    assert row["engine"] == "vLLM"  # the engine's name, not its id
    assert row["engine KV tokens"] == cells["engine_kv_cache_tokens"]["value"] == 973760
    assert row["engine blocks"] == 7162
    assert same_value(cells["engine_max_concurrency"]["value"], row["engine concurrency"])


@libreoffice
def test_a_deployments_title_follows_its_model_drop_down(recalculated, catalog_json):
    """Switching the model drop-down on the Plan sheet retitles the deployment there and on Deployments."""
    block = "llama_3_1_70b_h100x4_fp8"
    before = recalculated["catalog"]
    after = recalculated["changed"]
    row = destination(after, f"{block}.model").row
    old, new = before["Deployments"].cell(row, 2).value, after["Deployments"].cell(row, 2).value
    assert old.startswith(catalog_json["llama_3_1_70b"]["title"] + " on 4 x "), old
    assert new.startswith(catalog_json["qwen3_32b"]["title"] + " on 2 x "), new  # the gpus change too
    assert new in [c.value for c in after["Plan"]["A"]]  # the Plan section's title too
