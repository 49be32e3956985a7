"""The tensor-parallel sizes each engine accepts (issue: engines' own limits).

vLLM, SGLang and TensorRT-LLM split the attention heads evenly over a
tensor-parallel group and the KV heads evenly or by whole replicas
(kvdsl/prelude/engines.kvspec `runs_tensor_parallel`).  A deployment that
breaks its engine's limit is an error that names the rule; `solve --for gpus`
answers only sizes the chosen engine runs; the ideal accounting takes any.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cli

SPEC = Path(__file__).parent / "specs" / "tp_limits.kvspec"
# 32 heads, 8 KV heads: a size divides 32 and either divides 8 or is a multiple of it
RUNS_32_HEADS = {1, 2, 4, 8, 16, 32}
# batches whose ideal answers are 1, 2, 3, 4, 5, 6, 8 and 10 GPUs
BATCHES = (1, 4, 10, 13, 18, 19, 22, 40)


def solved_gpus(engine: str, batch: int) -> int | None:
    result = cli("solve", SPEC, "--for", "gpus", "--set", f"engine={engine}", "--set", f"batch={batch}", "--json")
    value = json.loads(result.output)["value"]
    assert result.exit_code == (0 if value is not None else 1), result.output
    return value


@pytest.fixture(scope="module")
def answers():
    return {(engine, batch): solved_gpus(engine, batch) for engine in ("ideal", "vllm") for batch in BATCHES}


def test_the_ideal_accounting_answers_sizes_engines_refuse(answers):
    ideal = {answers[("ideal", b)] for b in BATCHES}
    assert ideal >= {3, 5, 6}, ideal


def test_vllm_never_answers_3_5_6_or_7(answers):
    for batch in BATCHES:
        ideal, vllm = answers[("ideal", batch)], answers[("vllm", batch)]
        if batch == 40:
            # vLLM's own accounting: past 8 GPUs each holds the 8 KV heads' replicas and NCCL's buffers
            # for every peer, so 40 sequences of 32K never fit in its cache on RTX 4090s
            assert vllm is None
            continue
        assert vllm in RUNS_32_HEADS, (batch, vllm)
        # a size vLLM runs, at or above the smallest one at or above the ideal answer
        assert vllm >= min(n for n in RUNS_32_HEADS if n >= ideal), (batch, ideal, vllm)
    assert [answers[("vllm", b)] for b in BATCHES[:-1]] == [1, 2, 4, 4, 8, 8, 8]


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_other_engines_with_the_same_limit(engine):
    assert solved_gpus(engine, 4) in RUNS_32_HEADS


@pytest.mark.parametrize("engine, gpus, runs", [
    ("vllm", 3, False), ("vllm", 6, False), ("vllm", 12, False), ("vllm", 16, True),
    ("sglang", 5, False), ("trtllm", 7, False), ("vllm", 4, True),
    ("ideal", 3, True), ("llamacpp", 3, True),
])
def test_a_size_the_engine_refuses_is_an_error_naming_the_rule(engine, gpus, runs):
    result = cli("eval", SPEC, "--set", f"engine={engine}", "--set", f"gpus={gpus}", code=0 if runs else 2)
    if not runs:
        assert "breaks `require engine_runs_tensor_parallel`" in result.output
        assert f"`{engine}.heads_split_evenly` is false (`heads` = 32, `tensor_parallel` = {gpus})" in result.output
        assert "engines.kvspec" in result.output


@pytest.mark.parametrize("gpus, runs", [(16, True), (32, True), (6, False)])
def test_mla_keeps_one_latent_at_any_size_that_splits_the_heads(gpus, runs):
    """DeepSeek-V3: 128 heads and 128 `kv_heads` in its config, but one latent replicated on every GPU."""
    spec = Path(__file__).parents[1] / "specs" / "deployments" / "deepseek_v3_h200x8.kvspec"
    result = cli("eval", spec, "--json", "--set", "engine=vllm", "--set", f"gpus={gpus}", code=0 if runs else 2)
    if runs:
        cells = json.loads(result.output)["blocks"]["deepseek_v3_h200x8"]["cells"]
        assert cells["engine_runs_tensor_parallel"]["value"] is True
    else:
        assert "`vllm.heads_split_evenly` is false (`heads` = 128, `tensor_parallel` = 6)" in result.output


def test_an_engine_the_deployment_does_not_run_cannot_break_it(tmp_path):
    # SGLang's default memory fraction is negative on a 1 GiB device: only a deployment on SGLang is refused
    path = tmp_path / "tiny.kvspec"
    path.write_text('model m "M" {\n    layers = 2\n    heads = 4\n    head_dim = 8\n    params = 1000\n}\n\n'
                    'hardware g "G" {\n    memory = 1 GiB\n    bandwidth = 1 TB/s\n}\n\n'
                    'deployment d "D" {\n    model = m\n    hardware = g\n}\n')
    cli("eval", path, code=0)
    refused = cli("eval", path, "--set", "engine=sglang", code=1).output
    assert "breaks `require mem_fraction_static > 0" in refused
