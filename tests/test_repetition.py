"""Functions, families and `for`: the language says a repeated rule once, and every tool sees plain cells."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from cli_helpers import cli
from kvdsl import lsp_analysis as an
from kvdsl import lsp_complete
from kvdsl.api import build_program, evaluate_paths, parse_setting
from kvdsl.errors import KvdslError, flatten
from kvdsl.excel.names import excel_name
from kvdsl.fmt import format_text
from kvdsl.units import BOOL, TOKENS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "context_tiers.kvspec"
MODEL = 'model m "M" {\n    layers = 8\n    heads = 4\n    head_dim = 8\n    params = 1e9\n'


def spec(tmp_path, body: str, head: str = "") -> Path:
    path = tmp_path / "s.kvspec"
    path.write_text(head + MODEL + "".join(f"    {line}\n" for line in body.strip().split("\n")) + "}\n")
    return path


def values(tmp_path, body: str, head: str = "", settings=()) -> dict:
    return evaluate_paths([str(spec(tmp_path, body, head))], [parse_setting(s) for s in settings])[1]


def errors(tmp_path, body: str, head: str = "") -> list:
    with pytest.raises(KvdslError) as caught:
        build_program([str(spec(tmp_path, body, head))])
    return [e.message for e in flatten(caught.value)]


# ---- families ------------------------------------------------------------------


def test_a_family_makes_one_cell_per_member(tmp_path):
    v = values(tmp_path, "let sq[s in 1..4] = s * s + layers")
    assert [v[("m", f"sq[{i}]")] for i in range(1, 5)] == [9, 12, 17, 24]
    assert ("m", "sq[0]") not in v and ("m", "sq[5]") not in v


def test_members_read_each_other_by_an_index_known_once_the_variable_is(tmp_path):
    v = values(tmp_path, "let total[s in 1..4] = if s == 1 then layers else total[s - 1] + s")
    assert [v[("m", f"total[{i}]")] for i in range(1, 5)] == [8, 10, 13, 17]


def test_a_member_set_alone_and_from_the_command_line(tmp_path):
    path = spec(tmp_path, "let sq[s in 1..3] = s * s")
    path.write_text(path.read_text() + 'model n "N" extends m {\n    sq[2] = 40\n}\n')
    v = evaluate_paths([str(path)])[1]
    assert [v[("n", f"sq[{i}]")] for i in (1, 2, 3)] == [1, 40, 9]
    assert errors(tmp_path, "let sq[s in 1..3] = s * s\nsq[2] = 40") == ["cell `sq[2]` is defined twice in `m`"]
    v = values(tmp_path, "let sq[s in 1..3] = s * s\nlet top = max(for s in 1..3: sq[s])", settings=["sq[3]=50"])
    assert v[("m", "top")] == 50


def test_bounds_may_be_arithmetic_or_a_function_of_nothing(tmp_path):
    v = values(tmp_path, "let x[s in 2 * 1..counted() + 1] = s", head="fn counted() = 3\n")
    assert sorted(k[1] for k in v if k[1].startswith("x[")) == ["x[2]", "x[3]", "x[4]"]


def test_a_family_of_text_is_text(tmp_path):
    program = build_program([str(spec(tmp_path, 'let tag[s in 1..2] = "tier " & s'))])
    assert evaluate_paths([str(spec(tmp_path, 'let tag[s in 1..2] = "tier " & s'))])[1][("m", "tag[2]")] == "tier 2"
    assert program.cells[("m", "tag[1]")].dim == "text"


def test_a_family_in_the_prelude_is_a_family_in_every_deployment():
    program = build_program([str(ROOT / "specs" / "deployments" / "mistral_7b_l4.kvspec")])
    block = next(b for b in program.user_blocks() if b.kind == "deployment")
    members = [name for name in block.cells if name.startswith("vllm.stage_start[")]
    assert members == [f"vllm.stage_start[{i}]" for i in range(1, 9)]
    rc = program.cells[(block.name, "vllm.stage_start[3]")]
    assert rc.cell.member == ("s", 3) and rc.cell.span.path == "kvdsl/prelude/engine_vllm.kvspec"


# ---- functions -------------------------------------------------------------------


def test_a_function_is_inlined_and_later_passes_see_the_plain_rule(tmp_path):
    path = spec(tmp_path, "let x = twice(layers) + twice(heads)", head="fn twice(a) = 2 * a\n")
    program, v = evaluate_paths([str(path)])
    assert v[("m", "x")] == 24
    assert "twice" not in repr(program.cells[("m", "x")].expr)


def test_functions_call_functions_and_keep_units(tmp_path):
    head = "fn paged(tokens, page) = ceil(tokens / page) * page\nfn doubled_pages(t, p) = 2 * paged(t, p)\n"
    v = values(tmp_path, "let x = doubled_pages(1000 tokens, 16 tokens)", head)
    assert v[("m", "x")] == 2 * 1008
    assert build_program([str(spec(tmp_path, "let x = doubled_pages(1000 tokens, 16 tokens)", head))]).cells[("m", "x")].dim == TOKENS


def test_an_argument_the_body_does_not_use_is_dropped_unread(tmp_path):
    v = values(tmp_path, "let x = first(layers, no_such_cell)", head="fn first(a, b) = a\n")
    assert v[("m", "x")] == 8


def test_a_decided_if_keeps_only_its_branch(tmp_path):
    v = values(tmp_path, "let x[s in 1..3] = s\nlet d = max(for s in 1..3: x[s] - (if s == 1 then 0 else x[s - 1]))")
    assert v[("m", "d")] == 1


def test_for_gives_a_variadic_call_its_arguments_nested(tmp_path):
    v = values(tmp_path, "let x = max(for a in 1..3: min(for b in 1..2: a * b + layers))")
    assert v[("m", "x")] == 11


@pytest.mark.parametrize("whole_number", ["whole(n)", "floor(n) == n"])
def test_whole_is_built_in_and_bounds_the_workbook_input(tmp_path, whole_number):
    from kvdsl.excel.validation import bounds

    path = spec(tmp_path, f"let n = 3\nrequire n >= 1 and {whole_number}")
    program = build_program([str(path)])
    found = bounds(program, ("m", "n"))
    assert found is not None and found.whole and found.low == 1
    assert program.cells[("m", "n")].dim != BOOL


@pytest.mark.parametrize("body, head, message", [
    ("let x = f(layers)", "fn f(a) = a * heads\n", "the body of `f` reads `heads`, which is not one of its parameters (a)"),
    ("let x = f(1, 2)", "fn f(a) = a\n", "`f` takes 1 argument (a), not 2"),
    ("let x = f(1)", "fn f(a) = g(a)\nfn g(a) = f(a)\n", "functions call each other in a cycle: f -> g -> f"),
    ("let x = 1", "fn f(a, a) = a\n", "`f` has two parameters named `a`"),
    ("let x = f(for s in 1..2: s)", "fn f(a) = a\n", "`for` gives any number of arguments, and `f` takes 1 argument (a)"),
    ("let x = nope(1)", "", "unknown function `nope`"),
    ("let x[s in 1..3] = x[s + 1]", "", "unknown name `x[4]`"),
    ("let x[s in 1..3] = s\nlet y = x[s]", "", "an index is fixed before evaluation: it cannot read `s`"),
    ("let x = max(for s in 1..2000: s)", "", "`for s in 1..2000` gives 2,000 arguments, more than 1,000"),
    ("let x[s in 1..0] = s", "", "`x[s in 1..0]` has no members: the first bound is above the last"),
    ("let x[s in 1..2 GiB] = s", "", "a bound must be a whole number"),
])
def test_mistakes_have_their_own_messages(tmp_path, body, head, message):
    found = errors(tmp_path, body, head)
    assert any(message in text for text in found), found


def test_a_cycle_through_members_is_reported(tmp_path):
    found = errors(tmp_path, "let x[s in 1..2] = x[3 - s]")
    assert any("cycle" in text and "x[1]" in text and "x[2]" in text for text in found), found


# ---- every tool ------------------------------------------------------------------


def test_members_work_with_cells_explain_set_vary_and_json():
    result = cli("eval", EXAMPLE, "--cells", "tier_batch[2],largest_tier_for_24", "--json")
    assert result.exit_code == 0, result.output
    assert '"tier_batch[2]"' in result.output
    result = cli("explain", EXAMPLE, "tier_batch[2]", "--depth", "0")
    assert "(t = 2)" in result.output
    result = cli("eval", EXAMPLE, "--set", "tiers.tier_context[2]=32K", "--cells", "tier_batch[2]")
    assert re.search(r"tier_batch\[2\]\s+31", result.output), result.output
    result = cli("sweep", EXAMPLE, "--vary", "tier_context[1]=8K:16K:x2", "--cells", "tier_batch[1]", "--json")
    assert result.exit_code == 0 and '"tier_batch[1]"' in result.output, result.output


def test_a_member_has_a_defined_name_excel_takes_and_its_readable_header(tmp_path):
    from kvdsl.excel.workbook import build_workbook

    assert excel_name("tiers.tier_batch[3]") == "tiers.tier_batch.3"
    program, v = evaluate_paths([str(EXAMPLE)])
    wb, _ = build_workbook(program, v, [str(EXAMPLE)])
    assert "tiers.tier_batch.3" in wb.defined_names and "all_deployments.tier_batch.3" in wb.defined_names
    headers = {str(c.value) for ws in wb.worksheets for c in ws[2] if c.value}
    assert any(h.startswith("tier_batch[3]") for h in headers)
    formulas = [c.value for ws in wb.worksheets for row in ws.iter_rows() for c in row if isinstance(c.value, str)]
    assert any("MAX(IF(tiers.tier_batch.1>=24, 1, 0)" in f for f in formulas)


def test_the_formatter_knows_the_new_constructs_and_formats_to_itself():
    text = ('fn  twice( x )=2*x\n\nmodel m "M" {\n    let sq [ s in 1 .. 4 ] = s*s\n'
            '    let top = max( for s in 1..4 : sq [s] - twice(s) )\n    sq[ 2 ] = 5\n}\n')
    out = format_text(text)
    assert out == ('fn twice(x) = 2 * x\n\nmodel m "M" {\n    let sq[s in 1..4] = s * s\n'
                   '    let top = max(for s in 1..4: sq[s] - twice(s))\n    sq[2] = 5\n}\n')
    assert format_text(out) == out


def test_the_language_server_hovers_and_finds_functions_and_families():
    text = EXAMPLE.read_text(encoding="utf-8")
    analysis = an.analyze(EXAMPLE, text, {})
    assert analysis.good
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines, 1) if "tier_bytes[t in" in line)
    call = an.locate(analysis, row, lines[row - 1].index("paged_bytes") + 2)
    assert call.kind == "function" and call.name == "paged_bytes"
    hover = an.hover(analysis, call)
    assert "fn paged_bytes" in hover and "ceil(tokens / page) * page * per_token" in hover
    path, span = an.definition(analysis, call)
    assert path.name == "context_tiers.kvspec" and lines[span.line - 1].startswith("fn paged_bytes")
    family = an.locate(analysis, row, lines[row - 1].index("tier_bytes") + 2)
    assert "a member of the family `tier_bytes`" in an.hover(analysis, family)
    builtin = an.Target("function", name="whole")
    assert "built-in" in an.hover(analysis, builtin)
    labels = {c.label for c in lsp_complete.complete(analysis, text, row, len(lines[row - 1]) + 1)}
    assert {"paged_bytes", "whole", "max"} <= labels
    assert ("paged_bytes", "function") in {(s.name, s.kind) for s in an.symbols(analysis.spec)}


def test_the_prelude_says_the_stage_table_once():
    text = (ROOT / "kvdsl" / "prelude" / "engine_vllm.kvspec").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250  # with the scheduler limits and the parallel layouts
    assert not re.search(r"_[2-8]\b", text)  # no numbered copies
    prelude = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "kvdsl" / "prelude").glob("*.kvspec"))
    assert prelude.count("fn counted_stages() = 8") == 1 and "pipeline_stages > 8" not in prelude


def test_stage_values_for_each_pipeline_size_stay_exact(tmp_path):
    """The stage table against a direct count, for a pattern with every kind (the vLLM tests cover more)."""
    path = tmp_path / "stages.kvspec"
    path.write_text(
        'model m "M" {\n    layer_kinds = [[ssm] * 3, full, [sliding(64)] * 2] * 5\n    heads = 8\n    head_dim = 64\n'
        '    params = 1e9\n    ssm_inner = 128\n    ssm_state_size = 16\n}\n'
        'hardware g "G" {\n    memory = 80 GiB\n    bandwidth = 2 TB/s\n}\n'
        'deployment d "D" {\n    model = m\n    hardware = g\n    engine = vllm\n    kv_cache_memory_bytes = 10 GiB\n}\n')
    kinds = ((["ssm"] * 3) + ["full"] + ["sliding"] * 2) * 5
    for stages in range(1, 9):
        v = evaluate_paths([str(path)], [parse_setting(f"d.gpus={stages}"), parse_setting(f"d.pipeline_stages={stages}")])[1]
        base, rest = divmod(len(kinds), stages)
        sizes = [base + (1 if stages - 1 - rest <= i < stages - 1 else 0) for i in range(stages)]
        starts = [sum(sizes[:i]) for i in range(stages)] + [len(kinds)]
        per_stage = [kinds[starts[i]:starts[i + 1]] for i in range(stages)]
        assert v[("d", "vllm.full_layers")] == max(s.count("full") for s in per_stage)
        assert v[("d", "vllm.sliding_layers")] == max(s.count("sliding") for s in per_stage)
        assert v[("d", "vllm.state_layers")] == max(s.count("ssm") for s in per_stage)
        assert [v[("d", f"vllm.stage_start[{i}]")] for i in range(1, stages)] == starts[1:stages]
        assert all(v[("d", f"vllm.full_before[{i}]")] == kinds[:starts[min(i, stages)]].count("full") for i in range(1, 9))


def test_numbers_before_a_range_are_not_decimals():
    from kvdsl.parser import parse_cell

    cell = parse_cell("x[s in 1..8] = s", "<test>")
    assert cell.family.low.value == Fraction(1) and cell.family.high.value == Fraction(8)
    assert parse_cell("x = 1.5", "<test>").expr.value == Fraction(3, 2)
