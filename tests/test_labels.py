"""Labels: a `## Label: description` line above a rule names the cell for readers."""

from __future__ import annotations

import textwrap

from cli_helpers import cli

from kvdsl.api import build_program
from kvdsl.labels import describe, is_labelled, name_in_words

SPEC = textwrap.dedent("""\
    model m "M" {
        layers = 2
        heads = 4
        head_dim = 8
        params = 1000
        ## Answer: the number everything depends on.
        let answer = 42
        # a plain comment is not a label
        let plain = 1
    }

    hardware g "G" {
        memory = 1 GiB
        bandwidth = 1 TB/s
    }

    deployment d "D" {
        model = m
        hardware = g
        gpus = 2
    }
    """)

# What the workbook's Plan sheet and `plan` show a reader: each needs words.
READER_CELLS = {
    "deployment": ["model", "hardware", "gpus", "replicas", "context", "workload", "kv_dtype", "engine", "utilization",
                   "reserve_bytes", "max_batch", "max_context", "fits", "weights_bytes_per_gpu", "kv_bytes_per_gpu",
                   "kv_budget_bytes_per_gpu", "ttft_seconds", "tpot_seconds", "output_tokens_per_second",
                   "output_tokens_per_second_per_gpu", "meets_targets", "cost_per_hour", "cost_per_month",
                   "cost_per_million_output_tokens", "total_gpus", "users_served"],
    "hardware": ["memory", "bandwidth", "flops_bf16", "flops_fp8", "flops_fp4", "interconnect_bandwidth", "price_per_hour"],
    "workload": ["prompt_tokens", "output_tokens", "users", "ttft_target", "tpot_target"],
    "model": ["layers", "heads", "kv_heads", "head_dim", "params", "active_params", "context_limit", "kv_bytes_per_sequence"],
}


def program_of(tmp_path):
    path = tmp_path / "spec.kvspec"
    path.write_text(SPEC)
    return build_program([str(path)]), path


def test_a_double_hash_line_labels_the_rule_below(tmp_path):
    program, _ = program_of(tmp_path)
    assert describe(program.cells[("m", "answer")]) == ("Answer", "the number everything depends on.")
    assert not is_labelled(program.cells[("m", "plain")])
    assert describe(program.cells[("m", "plain")]) == ("Plain", "a plain comment is not a label")


def test_an_override_keeps_the_prelude_label(tmp_path):
    program, _ = program_of(tmp_path)
    gpus = program.cells[("d", "gpus")]
    assert gpus.cell.span.path.endswith("spec.kvspec")
    assert describe(gpus).label == "GPUs per copy"


def test_every_cell_a_reader_sees_is_labelled(tmp_path):
    program, _ = program_of(tmp_path)
    block = {"deployment": "d", "hardware": "g", "model": "m", "workload": "no_workload"}
    for kind, names in READER_CELLS.items():
        for name in names:
            label = describe(program.cells[(block[kind], name)])
            assert is_labelled(program.cells[(block[kind], name)]), (kind, name)
            assert label.description.endswith("."), (kind, name, label)
            assert len(label.label) <= 40, (kind, name, label)


def test_unlabelled_names_read_as_words():
    assert name_in_words("kv_bytes_per_gpu") == "KV bytes per GPU"
    assert name_in_words("vllm.num_blocks") == "vLLM num blocks"


def test_eval_and_explain_show_the_label(tmp_path):
    _, path = program_of(tmp_path)
    table = cli("eval", path, code=0).output
    line = next(x for x in table.splitlines() if x.strip().startswith("max_batch "))
    assert line.rstrip().endswith("Concurrent users that fit")
    explained = cli("explain", path, "max_batch", code=0).output.splitlines()
    assert explained[1].startswith("Concurrent users that fit: the most conversations")
