"""Regression tests for faults reported against the engine (issues 15.1, 16.2-16.8).

Each test fails on the code before its fix.  Commands run through click's
CliRunner unless a real process is needed (signals).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_helpers import check_seconds, cli, timed
from kvdsl.api import forget_programs

REPO = Path(__file__).resolve().parent.parent
DEPLOYMENTS = REPO / "specs" / "deployments"
MAMBA = str(DEPLOYMENTS / "mamba_2_8b_l4.kvspec")
MISTRAL = str(DEPLOYMENTS / "mistral_7b_l4.kvspec")
QWEN_SOLVED = str(DEPLOYMENTS / "qwen3_32b_h200_solved.kvspec")
LLAMA = str(DEPLOYMENTS / "llama_3_1_70b_h100x4_fp8.kvspec")

LOCATION = re.compile(r"^(\S+):(\d+):(\d+): error: ", re.M)


def write_bytes(tmp_path, data: bytes, name="spec.kvspec") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def quoted_line(stderr: str) -> str:
    """The source line an error quotes (the line after the location)."""
    lines = stderr.split("\n")
    first = next(i for i, line in enumerate(lines) if LOCATION.match(line))
    return lines[first + 1].strip()


# ---------------------------------------------------------------- line breaks (16.5)

MODEL_LINES = [
    'model m "M" {',
    "    # a comment holding {sep} in its text",
    "    layers = 2; heads = 4; head_dim = 8; params = 1e9",
    "    kv_heads = nope",
    "}",
]
SEPARATORS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_other_line_separators_are_ordinary_characters(tmp_path, sep):
    text = "\n".join(MODEL_LINES).replace("{sep}", sep) + "\n"
    spec = write_bytes(tmp_path, text.encode("utf-8"))
    r = cli("eval", spec, code=1)
    where = LOCATION.search(r.stderr)
    assert where.group(2, 3) == ("4", "16"), r.stderr
    assert quoted_line(r.stderr) == "kv_heads = nope", r.stderr
    caret = r.stderr.split("\n")[2]
    assert caret == " " * 19 + "^^^^", r.stderr


@pytest.mark.parametrize("ending", ["\r", "\r\n"], ids=["CR", "CRLF"])
def test_cr_and_crlf_files_read_as_lines(tmp_path, ending):
    text = ending.join(MODEL_LINES).replace("{sep}", "x") + ending
    spec = write_bytes(tmp_path, text.encode("utf-8"))
    r = cli("eval", spec, code=1)
    assert LOCATION.search(r.stderr).group(2, 3) == ("4", "16"), r.stderr
    assert quoted_line(r.stderr) == "kv_heads = nope"


def test_form_feed_in_a_comment_before_a_layer_pattern(tmp_path):
    lines = ['model m "M" {', "    # a \f comment", "    layer_kinds = [sliding, full]",
             "    layers = 2; heads = 4; head_dim = 8; params = 1e9; window = 128 tokens", "}"]
    spec = write_bytes(tmp_path, ("\n".join(lines) + "\n").encode("utf-8"))
    plain = write_bytes(tmp_path, ("\n".join(lines) + "\n").replace("\f", "x").encode("utf-8"), "plain.kvspec")
    got = json.loads(cli("eval", "--json", spec, code=0).stdout)["blocks"]["m"]["cells"]
    expected = json.loads(cli("eval", "--json", plain, code=0).stdout)["blocks"]["m"]["cells"]
    assert got == expected


def test_explain_shows_the_rule_itself_after_a_separator(tmp_path):
    lines = ['model m "M" {', "    # a \u2028 comment", "    layers = 2; heads = 4; head_dim = 8; params = 1e9",
             "    kv_heads = heads / 2", "}"]
    spec = write_bytes(tmp_path, ("\n".join(lines) + "\n").encode("utf-8"))
    r = cli("explain", spec, "kv_heads", code=0)
    assert "kv_heads = heads / 2" in r.stdout, r.stdout


def test_line_endings_share_a_cache_entry(tmp_path, monkeypatch):
    from kvdsl import cache
    from kvdsl.parser import parse_file

    monkeypatch.setenv("KVDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVDSL_NO_CACHE", raising=False)
    cache.directory.cache_clear()
    try:
        body = "\n".join(MODEL_LINES[:3]).replace("{sep}", "x") + "\n    kv_heads = 2\n}\n"
        lf = write_bytes(tmp_path, body.encode(), "lf.kvspec")
        crlf = write_bytes(tmp_path, body.replace("\n", "\r\n").encode(), "crlf.kvspec")
        first = parse_file(lf, "m.kvspec")
        assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
        again = parse_file(crlf, "m.kvspec")
        assert again == first
        assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
        cell = first.items[0].cells[-1]
        assert (cell.name, cell.span.line, cell.source) == ("kv_heads", 4, "kv_heads = 2")
    finally:
        cache.directory.cache_clear()


# ---------------------------------------------------------------- unbounded answers (16.3)

@pytest.mark.parametrize("spec, block", [(MISTRAL, "mistral_7b_l4"), (MAMBA, "mamba_2_8b_l4")])
def test_export_solving_context_where_memory_does_not_bound_it(tmp_path, spec, block):
    import openpyxl

    from kvdsl.excel.formula import UNBOUNDED

    out = tmp_path / "w.xlsx"
    cli("export", spec, "-o", out, "--set", f"{block}.context=?", code=0)
    wb = openpyxl.load_workbook(out)
    sheet, ref = next(iter(wb.defined_names[f"{block}.context"].destinations))
    cell = wb[sheet][ref.replace("$", "")]
    assert cell.value.startswith("=") and UNBOUNDED in cell.value
    assert '"unbounded"' in cell.number_format


def test_a_solved_formula_is_checked_as_the_sheet_computes_it():
    """The check of a solved cell's formula takes only the branch an IF takes, as a sheet does: a comparison with a
    bound that divides by 0 in a branch not taken is no error (SymPy's substitution met it and said "no number")."""
    import sympy as sp

    from kvdsl.solve_algebra import NoNumber, sheet_value

    a, b, c = sp.symbols("a b c")
    bound = sp.Piecewise((sp.oo, sp.Eq(b, 0)), (a / b, True))  # IF(b=0, 1E+300, a/b)
    formula = sp.Min(bound, sp.Piecewise((3, sp.Ge(c, bound)), (4, True)))
    assert sheet_value(formula, {a: 3, b: 0, c: 2}) == 4
    assert sheet_value(formula, {a: 3, b: 1, c: 5}) == 3
    for spoiled in (sp.Min(a / b, 7), sp.And(sp.Ge(c, a / b), sp.Ge(a, 1))):  # MIN and AND evaluate every argument
        with pytest.raises(NoNumber):
            sheet_value(spoiled, {a: 3, b: 0, c: 2})


def test_export_solving_context_of_a_llama_cpp_log_writes_its_formula(tmp_path):
    """Engine-log case L01 solved for context: 29 s of CPU to refuse its formula (it "divides by 0 there"), though
    the formula gives the answer.  It is written, and gives 256,124 tokens (LibreOffice recalculates the same)."""
    import openpyxl

    spec = REPO / "specs" / "engine_logs" / "l01_llama_3_1_70b_q4_0.kvspec"
    block = "l01_llama_3_1_70b_q4_0"
    out = tmp_path / "w.xlsx"
    cli("export", spec, "-o", out, "--set", "context=?", code=0)
    workbook = openpyxl.load_workbook(out)
    sheet, ref = next(iter(workbook.defined_names[f"{block}.context"].destinations))
    formula = workbook[sheet][ref.replace("$", "")].value
    assert formula.startswith("=") and "INT(" in formula  # a formula, not the number


def test_export_solving_context_bounded_by_the_condition_of_an_engine_rule_writes_its_formula(tmp_path):
    """Engine-log case V25 (vLLM) solved for context: its answer, 262,144 tokens, is the model's context limit,
    which vLLM's rule reads in a condition (`if ... and context <= model.context_limit then ... else 0`).  The
    closed form missed it (1,454,272 tokens) and the export failed (exit 1, no workbook); it is now the smaller
    of the memory's bound and that limit (LibreOffice recalculates 262,144)."""
    import openpyxl

    spec = REPO / "specs" / "engine_logs" / "v25_nemotron_3_nano_4b_gb10.kvspec"
    out = tmp_path / "w.xlsx"
    cli("export", spec, "-o", out, "--set", "context=?", code=0)
    workbook = openpyxl.load_workbook(out)
    sheet, ref = next(iter(workbook.defined_names["v25_nemotron_3_nano_4b_gb10.context"].destinations))
    formula = workbook[sheet][ref.replace("$", "")].value
    assert formula.startswith("=") and "INT(MIN(" in formula and formula.count("all_models.context_limit") >= 2


def test_a_solved_formula_keeps_within_the_limit_a_rule_s_condition_sets():
    """DeepSeek-R1 with DEP on vLLM solved for context, its formula then read at batch 1: it said 910,080 tokens
    where the exact answer is the model's limit, 163,840 (vLLM's rule holds only up to it)."""
    from kvdsl.api import build_program, parse_setting
    from kvdsl.evaluate import evaluate
    from kvdsl.solve import solve
    from kvdsl.solve_algebra import sheet_value
    from kvdsl.solve_live import live_form
    from kvdsl.symbolic import to_rational

    spec, block = [str(DEPLOYMENTS / "deepseek_r1_h200x8_dep.kvspec")], "deepseek_r1_h200x8_dep"
    expr, expander, _ = live_form(build_program(spec, []), block, "context")
    for batch in (1, 16, 888):
        program = build_program(spec, [parse_setting(f"{block}.batch={batch}")])
        values = evaluate(program)
        env = {s: to_rational(values[k]) for s, k in expander.symbols.items() if values.get(k) is not None}
        assert sheet_value(expr, env) == solve(program, block, "context").value


def test_a_solved_batch_is_0_where_the_context_is_past_the_model_s_limit():
    """Mistral-7B's largest batch as a formula, read at a context past the model's 32K: no batch fits there, and the
    formula said 13 (it left out the conditions no batch changes); it gives 0, as `ideal.max_batch` does."""
    from kvdsl.api import build_program, parse_setting
    from kvdsl.evaluate import evaluate
    from kvdsl.solve_algebra import sheet_value
    from kvdsl.solve_live import live_form
    from kvdsl.symbolic import to_rational

    expr, expander, _ = live_form(build_program([MISTRAL], []), "mistral_7b_l4", "batch")
    for context, batch in (("8K", 13), ("64K", 0)):
        program = build_program([MISTRAL], [parse_setting(f"mistral_7b_l4.context={context}")])
        values = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))
        env = {s: to_rational(values[k]) for s, k in expander.symbols.items() if values.get(k) is not None}
        assert sheet_value(expr, env) == batch


def test_export_of_an_answer_no_formula_follows_writes_it_with_a_note(tmp_path):
    """SGLang's S02 solved for gpus: its `fits` reads every SGLang rule and the
    heads must divide evenly, which no formula follows; the workbook holds the
    searched answer with a note saying it does not follow the other inputs."""
    import openpyxl

    spec = Path(__file__).resolve().parents[1] / "specs" / "engine_logs" / "s02_qwq_32b_l4x4.kvspec"
    out = tmp_path / "w.xlsx"
    cli("export", spec, "-o", out, "--set", "gpus=?", code=0)
    wb = openpyxl.load_workbook(out)
    name = wb.defined_names["s02_qwq_32b_l4x4.gpus"]
    sheet, cell = next(name.destinations)
    target = wb[sheet][cell.replace("$", "")]
    assert target.value == 4 and "does not follow the other inputs" in target.comment.text


def test_unbounded_prints_as_a_documented_large_number():
    import sympy as sp

    from kvdsl.excel.formula import UNBOUNDED
    from kvdsl.excel.printer import excel_formula

    x = sp.Symbol("x")
    assert excel_formula(sp.Min(x, sp.oo)) == "x"
    assert excel_formula(sp.Piecewise((sp.oo, sp.Eq(x, 0)), (1 / x, True))) == f"IF(x=0, {UNBOUNDED}, 1/x)"
    assert float(UNBOUNDED) > 1e100


def test_a_conditional_condition_stays_lazy_in_excel():
    import sympy as sp

    from kvdsl.excel.printer import excel_formula

    x, y = sp.symbols("x y")
    assert excel_formula(sp.ITE(sp.Eq(x, 0), y > 1, y > 1 / x)) == "IF(x=0, y>1, y>1/x)"


def test_unbounded_reads_unbounded():
    from kvdsl.display import format_value
    from kvdsl.units import TOKENS

    assert format_value(float("inf"), TOKENS) == "unbounded"


@pytest.mark.parametrize("vary", ["batch=1:4", "gpus=1:4", "utilization=0.5:1:0.25", "context=1K:1M:x4"])
def test_sweep_of_a_pure_state_space_model(vary):
    r = cli("sweep", MAMBA, "--block", "mamba_2_8b_l4", "--vary", vary, code=0)
    header, *rows = r.stdout.strip().split("\n")
    assert "fits" in header.split(",") and rows


def test_sweep_writes_an_unbounded_value_as_an_empty_field():
    r = cli("sweep", LLAMA, "--block", "llama_3_1_70b_h100x4_fp8", "--vary", "batch=0:1", code=0)
    header, zero, one = r.stdout.strip().split("\n")
    row = dict(zip(header.split(","), zero.split(",")))
    assert row["max_context"] != "" and row["tokens_in_budget"] == ""  # a budget per sequence of 0 sequences
    assert "inf" not in r.stdout and "nan" not in r.stdout


# ---------------------------------------------------------------- sweeps on every axis (16.8)

def _exact_rows(spec, block, name, points):
    from kvdsl.api import evaluate_paths, parse_setting

    for point in points:
        _, values = evaluate_paths([spec], [parse_setting(f"{block}.{name}={point}")])
        yield point, values


@pytest.mark.parametrize("spec, block, name, points", [
    (LLAMA, "llama_3_1_70b_h100x4_fp8", "gpus", [1, 2, 3, 4, 8, 16]),
    (MISTRAL, "mistral_7b_l4", "context", [1024, 4096, 5000, 32768]),
    (MAMBA, "mamba_2_8b_l4", "batch", [1, 3, 64]),
    (str(DEPLOYMENTS / "gpt_oss_120b_h100.kvspec"), "gpt_oss_120b_h100", "utilization", ["0.5", "0.75", "0.9"]),
])
def test_sweep_equals_eval_point_by_point(spec, block, name, points):
    from fractions import Fraction

    from kvdsl.api import build_program
    from kvdsl.sweep import prepare

    compiled = prepare(build_program([spec]), block, [f"{name}={points[0]}:{points[0]}"])
    for point, values in _exact_rows(spec, block, name, points):
        compiled.axes[0] = type(compiled.axes[0])(name, __import__("numpy").array([float(Fraction(point))]))
        inputs, results = compiled.run()
        for cell, column in zip(compiled.results, results):
            want = values[(block, cell)]
            if want is None:
                continue
            if repr(want) == "none":  # no value here (a deployment that does not fit): not a number in a sweep
                assert column[0] != column[0], (name, point, cell)
                continue
            assert column[0] == pytest.approx(float(want), rel=1e-12), (name, point, cell)


def test_sweep_of_gpus_compiles_once_not_per_value():
    few = cli("sweep", LLAMA, "--block", "llama_3_1_70b_h100x4_fp8", "--vary", "gpus=1:2", "--json", code=0)
    many = cli("sweep", LLAMA, "--block", "llama_3_1_70b_h100x4_fp8", "--vary", "gpus=1:16", "--json", code=0)
    assert json.loads(many.stdout)["points"] == 16
    # compiled per value, sixteen values would cost about eight times two
    assert json.loads(many.stdout)["compile_seconds"] < 3 * json.loads(few.stdout)["compile_seconds"] + 0.5


@pytest.mark.libreoffice
def test_export_of_an_unbounded_regime_recalculates_to_eval(tmp_path):
    import openpyxl

    from workbook_helpers import compare_numeric, error_cells, eval_json, recalculate

    out = tmp_path / "mamba.xlsx"
    cli("export", MAMBA, "-o", out, "--set", "mamba_2_8b_l4.context=?", code=0)
    wb = openpyxl.load_workbook(recalculate([out])[0], data_only=True)
    count, bad = compare_numeric(wb, eval_json(MAMBA, ["mamba_2_8b_l4.context=?"]))
    assert count > 100 and not bad, bad[:10]
    assert error_cells(wb) == []


# ---------------------------------------------------------------- --set X=? over a spec's X = ?

@pytest.mark.parametrize("setting", ["batch=?", "qwen3_32b_h200_solved.batch=?"])
def test_setting_an_unknown_the_spec_already_has_changes_nothing(setting):
    alone = json.loads(cli("eval", "--json", QWEN_SOLVED, code=0).stdout)
    again = json.loads(cli("eval", "--json", QWEN_SOLVED, "--set", setting, code=0).stdout)
    assert again == alone
    assert alone["blocks"]["qwen3_32b_h200_solved"]["cells"]["batch"]["value"] == 13


def test_solve_with_the_unknown_set_again_is_whole():
    r = cli("solve", QWEN_SOLVED, "--for", "batch", "--set", "batch=?", "--json", code=0)
    assert json.loads(r.stdout)["value"] == 13


# ---------------------------------------------------------------- workbook names Excel treats as one (16.2)

MODEL_HEAD = 'model {name} "M" {{\n    layers = 2; heads = 4; head_dim = 8; params = 1e9\n'


def _export_refused(tmp_path, text):
    spec = tmp_path / "names.kvspec"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "out.xlsx"
    r = cli("export", spec, "-o", out, code=1)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["names.kvspec"]
    return r


def test_cells_differing_only_by_case_are_refused_at_the_cell(tmp_path):
    r = _export_refused(tmp_path, MODEL_HEAD.format(name="m") + "    let Memory2 = 5\n    let memory2 = 7\n}\n")
    assert LOCATION.search(r.stderr).group(2, 3) == ("4", "9")
    assert "`m.Memory2`" in r.stderr and "`m.memory2`" in r.stderr and "ignore case" in r.stderr


def test_columns_differing_only_by_case_are_refused(tmp_path):
    text = MODEL_HEAD.format(name="a") + "    let Extra = 5\n}\n" + MODEL_HEAD.format(name="b") + "    let extra = 5\n}\n"
    r = _export_refused(tmp_path, text)
    assert LOCATION.search(r.stderr).group(2, 3) == ("7", "9")
    assert "all_models.Extra" in r.stderr and "all_models.extra" in r.stderr


@pytest.mark.parametrize("name", ["_xlfn_m", "_XLNM", "_xlws2"])
def test_block_names_with_a_reserved_prefix_are_refused(tmp_path, name):
    r = _export_refused(tmp_path, MODEL_HEAD.format(name=name) + "}\n")
    assert LOCATION.search(r.stderr).group(2, 3) == ("1", "7")
    assert "_xlfn" in r.stderr


def test_a_column_name_over_255_characters_is_refused(tmp_path):
    r = _export_refused(tmp_path, MODEL_HEAD.format(name="m") + "    " + "b" * 246 + " = 1\n}\n")
    assert LOCATION.search(r.stderr).group(2, 3) == ("3", "5")
    assert "255" in r.stderr and "column" in r.stderr


# ---------------------------------------------------------------- internal errors found by fuzzing (15.1)

HUGE = "1" * 5000  # more digits than Python turns into an int


@pytest.mark.parametrize("value", [f"1e{HUGE}", f"1e{'0' * 5000}5", f"0.{'0' * 5000}1", f"{'0' * 5000}1", f"1e-{HUGE}"],
                         ids=["exponent", "zeros-in-exponent", "zeros-after-point", "leading-zeros", "negative-exponent"])
def test_a_number_with_thousands_of_digits_is_a_clean_error_or_a_value(value):
    r = cli("eval", MAMBA, "--set", f"context={value}")
    assert r.exit_code in (0, 1, 2)


def test_a_huge_exponent_in_a_file_is_a_positioned_error(tmp_path):
    spec = tmp_path / "big.kvspec"
    spec.write_text(MODEL_HEAD.format(name="m") + f"    context_limit = 1e{HUGE}\n}}\n")
    r = cli("eval", spec, code=1)
    assert LOCATION.search(r.stderr).group(2, 3) == ("3", "21")
    assert "out of range" in r.stderr


def test_a_pattern_repeated_a_huge_number_of_times_is_a_positioned_error(tmp_path):
    spec = tmp_path / "pattern.kvspec"
    spec.write_text(MODEL_HEAD.format(name="m") + f"    layer_kinds = [full] * {HUGE}\n}}\n")
    r = cli("eval", spec, code=1)
    assert LOCATION.search(r.stderr).group(2) == "3"


def test_compare_a_missing_block_with_a_setting_everywhere_answers_quickly():
    catalog = str(REPO / "specs" / "catalog.kvspec")
    forget_programs()  # the yardstick builds the catalog afresh, as the command does
    yardstick = check_seconds(catalog)
    forget_programs()
    r, seconds = timed("compare", catalog, "--block", "nope", "--set", "heads=512 MiB")
    assert seconds < 5 * yardstick + 1
    assert r.exit_code in (1, 2) and "error" in r.stderr


# ---------------------------------------------------------------- temporary files are cleaned (16.7)

# The writer raises KeyboardInterrupt on SIGINT even when started from a
# background job, which inherits SIGINT ignored.
WRITER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from kvdsl.files import atomic_writer
with atomic_writer(sys.argv[1]) as stream:
    stream.write("partial")
    stream.flush()
    print("ready", flush=True)
    time.sleep(60)
"""


def _writer(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "out.csv")], stdout=subprocess.PIPE,
                               env=env, text=True)
    assert process.stdout.readline().strip() == "ready"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "no temporary file while writing"
    return process


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_an_interrupted_write_removes_its_temporary_file(tmp_path, signame):
    import signal

    process = _writer(tmp_path)
    process.send_signal(getattr(signal, signame))
    assert process.wait(timeout=20) != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_killed_write_is_cleaned_by_the_next_one(tmp_path):
    import signal

    process = _writer(tmp_path)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=20)
    stale = [p.name for p in tmp_path.iterdir()]
    assert len(stale) == 1 and stale[0].startswith(".out.csv.") and stale[0].endswith(".tmp")
    cli("sweep", LLAMA, "--block", "llama_3_1_70b_h100x4_fp8", "--vary", "batch=1:2", "--out", tmp_path / "out.csv", code=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_another_running_writer_keeps_its_temporary_file(tmp_path):
    process = _writer(tmp_path)
    try:
        cli("sweep", LLAMA, "--block", "llama_3_1_70b_h100x4_fp8", "--vary", "batch=1:2", "--out", tmp_path / "out.csv", code=0)
        assert len([p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]) == 1
    finally:
        process.kill()
        process.wait()
