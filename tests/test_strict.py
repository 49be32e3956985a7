"""The strict language: unknown cells refused, `let` cells, rule groups,
engines defined in a spec, text values, and `check` rejecting what `eval` does."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvdsl.api import evaluate_paths, parse_setting
from kvdsl.cli import main

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
TOY_ENGINE = ROOT / "tests" / "specs" / "fixed_pool_engine.kvspec"

DEPLOYMENT = textwrap.dedent("""\
    import "{root}/specs/models/llama_3_1_8b.kvspec"
    import "{root}/specs/hardware/h100_sxm.kvspec"

    deployment chat "Llama-3.1-8B on H100" {{
        model = llama_3_1_8b
        hardware = h100_sxm
    {body}
    }}
    """)


def spec(tmp_path: Path, body: str, extra: str = "") -> Path:
    path = tmp_path / "chat.kvspec"
    path.write_text(DEPLOYMENT.format(root=ROOT, body=textwrap.indent(textwrap.dedent(body), "    ")) + extra)
    return path


def cli(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert result.exit_code == code, result.output
    return result


# ---- unknown cells ------------------------------------------------------------------

@pytest.mark.parametrize("line, hint", [
    ("gpu = 2", "did you mean `gpus`?"),
    ("utilisation = 0.95", "did you mean `utilization`?"),
    ("contxt = 64K", "did you mean `context`?"),
    ("tokenizer_pool = 4", "declared with `let tokenizer_pool = ...`"),
])
@pytest.mark.parametrize("command", ["check", "eval"])
def test_a_cell_no_kind_defines_is_an_error_at_its_line(tmp_path, line, hint, command):
    out = cli(command, spec(tmp_path, line), code=1).output
    name = line.split()[0]
    assert f"chat.kvspec:7:5: error: `{name}` is not a cell of deployment `chat`" in out
    assert hint in out
    assert "let " in out  # the way to declare a cell of one's own is always shown


def test_let_declares_a_cell_of_ones_own(tmp_path):
    path = spec(tmp_path, "let headroom = 2 GiB\nreserve_bytes = headroom\n")
    program, values = evaluate_paths([str(path)])
    assert values[("chat", "headroom")] == 2 * 2**30
    assert values[("chat", "reserve_bytes")] == 2 * 2**30
    program, values = evaluate_paths([str(path)], [parse_setting("headroom=3 GiB")])
    assert values[("chat", "reserve_bytes")] == 3 * 2**30


def test_let_of_a_cell_the_kind_has_is_an_error(tmp_path):
    out = cli("check", spec(tmp_path, "let gpus = 2"), code=1).output
    assert "`let gpus`: every deployment already has a cell `gpus`" in out and "set it without `let`" in out


def test_set_of_an_unknown_cell_is_a_usage_error(tmp_path):
    out = cli("eval", spec(tmp_path, ""), "--set", "gpu=2", code=2).output
    assert "did you mean `gpus`?" in out


def test_defaults_in_a_user_file_are_strict_too(tmp_path):
    extra = "defaults deployment {\n    utilisation = 0.95\n}\n"
    out = cli("check", spec(tmp_path, "", extra), code=1).output
    assert "`utilisation` is not a cell of a deployment" in out and "did you mean `utilization`?" in out
    extra = "defaults deployment {\n    let headroom = 1 GiB\n    reserve_bytes = headroom\n}\n"
    _, values = evaluate_paths([str(spec(tmp_path, "", extra))])
    assert values[("chat", "reserve_bytes")] == 2**30


def test_a_parent_declares_for_its_children(tmp_path):
    extra = 'deployment chat2 "Two" extends chat {\n    headroom = 4 GiB\n}\n'
    _, values = evaluate_paths([str(spec(tmp_path, "let headroom = 1 GiB", extra))])
    assert values[("chat2", "headroom")] == 4 * 2**30


# ---- check rejects what eval rejects ----------------------------------------------------------

@pytest.mark.parametrize("body", [
    "utilization = 1.5",        # a broken `require`
    "gpus = 1\nbatch = ?\ncontext = 1M",  # a `?` with no answer: past the model's context limit
])
def test_check_rejects_what_eval_rejects_with_the_same_message(tmp_path, body):
    path = spec(tmp_path, body)
    checked, evaluated = cli("check", path, code=1).stderr, cli("eval", path, code=1).stderr
    assert evaluated in (checked, checked + "1 of 1 deployment does not fit: chat\n")  # eval: every block first


# ---- rule groups ----------------------------------------------------------------------

def test_defaults_for_several_kinds_state_a_rule_once(tmp_path):
    extra = "defaults model, deployment {\n    let double_kv = kv_bytes_per_element * 2\n}\n"
    _, values = evaluate_paths([str(spec(tmp_path, "kv_dtype = fp8", extra))])
    assert values[("llama_3_1_8b", "double_kv")] == 4  # fp16 in the model
    assert values[("chat", "double_kv")] == 2          # fp8 in the deployment


# ---- engines ----------------------------------------------------------------------------

def test_an_engine_defined_in_a_spec_appears_everywhere(tmp_path):
    data = json.loads(cli("eval", TOY_ENGINE, "--json").output)
    assert data["blocks"]["fixed_pool"]["kind"] == "engine"
    cells = data["blocks"]["qwen3_8b_rtx4090"]["cells"]
    assert cells["fixed_pool.num_blocks"]["value"] > 0
    compared = json.loads(cli("compare", TOY_ENGINE, "--json").output)
    assert "fixed_pool" in compared["engines"] and compared["reasons"]["fixed_pool"]
    chosen = json.loads(cli("eval", TOY_ENGINE, "--json", "--set", "engine=fixed_pool").output)
    chosen = chosen["blocks"]["qwen3_8b_rtx4090"]["cells"]
    assert chosen["engine_num_blocks"] == chosen["fixed_pool.num_blocks"]


def test_an_engine_missing_a_figure_is_an_error(tmp_path):
    path = tmp_path / "e.kvspec"
    path.write_text(f'import "{SPECS}/deployments/mistral_7b_l4.kvspec"\n'
                    'engine half "Half" {\n    kv_cache_tokens = 0 tokens\n}\n')
    out = cli("check", path, code=1).output
    assert "engine `half`, run by deployment `mistral_7b_l4`, does not set `num_blocks`" in out


def test_a_deployment_sets_an_engine_cell_for_itself(tmp_path):
    path = spec(tmp_path, "engine = vllm\nvllm.tokens_from_concurrency = false")
    _, values = evaluate_paths([str(path)])
    assert values[("chat", "vllm.tokens_from_concurrency")] is False
    groups, blocks = values[("chat", "vllm.groups")], values[("chat", "vllm.num_blocks")]
    assert values[("chat", "engine_kv_cache_tokens")] == blocks // groups * 16


def test_an_engine_setting_for_every_deployment_with_set():
    _, values = evaluate_paths([str(SPECS / "deployments" / "gpt_oss_120b_h100.kvspec")],
                               [parse_setting("vllm.hybrid_allocator=false")])
    assert values[("gpt_oss_120b_h100", "vllm.groups")] == 1


def test_engine_dot_reads_the_chosen_engine(tmp_path):
    for engine in ("ideal", "vllm", "sglang", "trtllm", "llamacpp"):
        _, values = evaluate_paths([str(spec(tmp_path, f"engine = {engine}"))])
        assert values[("chat", "engine_num_blocks")] == values[("chat", f"{engine}.num_blocks")]


def test_eval_lists_the_chosen_engine_and_all_on_request(tmp_path):
    path = spec(tmp_path, "engine = sglang")
    short, every = cli("eval", path).output, cli("eval", path, "--all").output
    assert "sglang.kv_cache_tokens" in short and "vllm.num_blocks" not in short
    assert "cells of the other engines: --all shows them" in short
    assert "vllm.num_blocks" in every


# ---- text values ------------------------------------------------------------------------

@pytest.mark.parametrize("model, scheme", [
    ("llama_3_1_70b", "GQA"),
    ("deepseek_v3", "MLA"),
    ("gemma_2_9b_it", "GQA 21 full + 21 sliding(4096)"),
    ("mistral_7b_v0_1", "GQA sliding(4096)"),
    ("gpt_oss_120b", "GQA 18 full + 18 sliding(128)"),
    ("jamba_v0_1", "GQA 4 full + 28 SSM"),
    ("mamba_2_8b_hf", "SSM"),
])
def test_the_scheme_label_is_one_prelude_rule(model, scheme):
    _, values = evaluate_paths([str(SPECS / "models" / f"{model}.kvspec")])
    assert values[(model, "scheme")] == scheme


def test_text_expressions(tmp_path):
    body = ('let label = "on " & gpus & " GPUs"\n'
            'let big = if gpus > 1 then "many" else "one"\n'
            'let same = label == "on 4 GPUs"\n'
            "gpus = 4")
    _, values = evaluate_paths([str(spec(tmp_path, body))])
    assert values[("chat", "label")] == "on 4 GPUs"
    assert values[("chat", "big")] == "many" and values[("chat", "same")] is True


@pytest.mark.parametrize("body, message", [
    ('let x = "a" + "b"', "`+` needs numbers, not text"),
    ('let x = "a" * 2', "`*` needs a number, not text"),
    ('let x = "a" < "b"', "`<` compares numbers, not text"),
    ('let x = true & "a"', "`&` joins text and numbers, not conditions"),
])
def test_text_in_arithmetic_is_refused(tmp_path, body, message):
    assert message in cli("check", spec(tmp_path, body), code=1).output


# ---- the workbook: a user's engine in the drop-down, text rules as formulas ---------------

def _engine_workbook(tmp_path):
    from workbook_helpers import export

    spec = tmp_path / "toy.kvspec"
    spec.write_text(f'import "{TOY_ENGINE.as_posix()}"\n'
                    f'import "{(SPECS / "models" / "gemma_2_9b_it.kvspec").as_posix()}"\n'
                    f'import "{(SPECS / "models" / "jamba_v0_1.kvspec").as_posix()}"\n')
    return spec, export(spec, tmp_path / "toy.xlsx")


def test_a_user_engine_is_in_the_workbook_drop_down(tmp_path):
    import openpyxl

    from workbook_helpers import destination, typed_cell

    _, path = _engine_workbook(tmp_path)
    wb = openpyxl.load_workbook(path)
    engines = [wb["Engines"].cell(row, 1).value for row in range(3, wb["Engines"].max_row + 1)]
    assert "fixed_pool" in engines and "vllm" in engines
    target, names = typed_cell(wb, "qwen3_8b_rtx4090.engine")  # typed on the Plan sheet, by name
    validations = [dv for dv in target.parent.data_validations.dataValidation if target.coordinate in dv.sqref]
    assert [dv.formula1 for dv in validations] == ["=all_engines_names"]
    assert "fixed_pool" in names and target.value in names.values()
    assert "fixed_pool" in destination(wb, "qwen3_8b_rtx4090.engine_num_blocks").value  # the nested IF names it


@pytest.mark.libreoffice
def test_choosing_a_user_engine_in_the_workbook_recalculates_to_eval(tmp_path):
    import openpyxl

    from workbook_helpers import compare_numeric, destination, eval_json, named, recalculate

    spec, path = _engine_workbook(tmp_path)
    wb = openpyxl.load_workbook(path)
    destination(wb, "qwen3_8b_rtx4090.engine").value = "fixed_pool"
    changed = tmp_path / "changed.xlsx"
    wb.save(changed)
    [out] = recalculate([changed], tmp_path / "recalculated", tmp_path / "lo-profile")
    got = openpyxl.load_workbook(out, data_only=True)
    blocks = eval_json(spec, ["qwen3_8b_rtx4090.engine=fixed_pool"])
    count, bad = compare_numeric(got, blocks)
    assert not bad and count > 300, bad[:10]
    texts = [(b, c, e["value"]) for b, info in blocks.items() for c, e in info["cells"].items()
             if c in ("scheme", "attention_scheme")]
    assert {value for _, _, value in texts} >= {"GQA 21 full + 21 sliding(4096)", "GQA 4 full + 28 SSM", "GQA"}
    for block, cell, value in texts:  # text rules recalculate to the same text
        assert named(got, f"{block}.{cell}") == value
