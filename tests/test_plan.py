"""`solve --for replicas` against a workload's targets, and `kvdsl plan`."""

import json
from pathlib import Path

from tests.cli_helpers import cli

ROOT = Path(__file__).resolve().parent.parent


def spec(tmp_path, **cells):
    body = "\n".join(f"    {k} = {v}" for k, v in cells.items())
    path = tmp_path / "d.kvspec"
    path.write_text(f'import "{ROOT}/specs/models/llama_3_1_70b.kvspec"\nimport "{ROOT}/specs/hardware/h100_sxm.kvspec"\n'
                    f'deployment d "d" {{\n    model = llama_3_1_70b\n    hardware = h100_sxm\n    workload = chat_workload\n'
                    f'    gpus = 4\n    weight_dtype = fp8\n    kv_dtype = fp8\n{body}\n}}\n')
    return path


def cell(path, name, *sets):
    out = cli("eval", path, "--json", *[a for s in sets for a in ("--set", s)], code=0).output
    return json.loads(out)["blocks"]["d"]["cells"][name]["value"]


def test_solve_for_replicas_serves_the_users_within_the_targets(tmp_path):
    path = spec(tmp_path, batch=64)
    answer = json.loads(cli("solve", path, "--for", "replicas", "--json", code=0).output)
    n = answer["value"]
    assert n == 32  # ceil(2000 users / 64 per copy): each copy meets 50 ms per token at batch 64
    assert cell(path, "meets_targets", f"replicas={n}") is True
    assert cell(path, "meets_targets", f"replicas={n - 1}") is False
    assert "one fewer does not" in cli("solve", path, "--for", "replicas", code=0).output


def test_solve_for_replicas_names_the_target_that_fails(tmp_path):
    path = spec(tmp_path, batch=1100)  # too many sequences for 50 ms per token (1,145 fit)
    out = cli("solve", path, "--for", "replicas", code=1).output
    assert "no `replicas` meets the workload's targets" in out and "misses TPOT: " in out


def test_plan_json_contract_and_ranking():
    out = cli("plan", ROOT / "specs" / "catalog.kvspec", "--model", "llama_3_1_70b", "--hardware", "h100_sxm,h200,l40s",
              "--max-gpus", "8", "--json", code=0).output
    plan = json.loads(out)
    assert plan["workload"] == "chat_workload"
    assert plan["options"], "some option serves the chat_workload"
    keys = {"model", "hardware", "engine", "gpus", "pipeline_stages", "attention_data_parallel", "expert_parallel", "prefill_gpus",
            "replicas", "weight_dtype", "kv_dtype", "batch",
            "ttft_seconds", "tpot_seconds", "output_tokens_per_second_per_gpu", "cost_per_month",
            "cost_per_million_output_tokens", "engine_max_concurrency", "verdict", "launch", "launch_note"}
    for option in plan["options"]:
        assert set(option) == keys
        assert option["tpot_seconds"] <= 0.05 and option["ttft_seconds"] <= 2
        assert option["replicas"] * option["batch"] >= 2000
        assert option["verdict"].startswith("meets the workload: ")
        # never more sequences per copy than the engine holds
        assert option["batch"] <= option["engine_max_concurrency"]
    costs = [o["cost_per_month"] for o in plan["options"]]
    assert costs == sorted(costs)
    # vLLM splits 64 heads over 1, 2, 4 or 8 GPUs, not 3
    assert not any(o["gpus"] // o["pipeline_stages"] in (3, 5, 6, 7) for o in plan["options"])
    assert {o["engine"] for o in plan["options"]} == {"vllm", "sglang", "trtllm"}
    assert all(set(r) == {"model", "hardware", "gpus", "reason"} for r in plan["rejected"])
    assert any("weights need" in r["reason"] for r in plan["rejected"])


def test_plan_launch_lines_carry_the_flags_of_each_engine():
    out = cli("plan", ROOT / "specs" / "catalog.kvspec", "--model", "llama_3_1_70b", "--hardware", "h100_sxm,h200",
              "--json", code=0).output
    flags = {"vllm": ("vllm serve ", "--tensor-parallel-size ", "--max-model-len 1250", "--gpu-memory-utilization 0.9",
                      "--max-num-seqs "),
             "sglang": ("python -m sglang.launch_server --model-path ", "--tp-size ", "--context-length 1250",
                        "--mem-fraction-static ", "--max-running-requests "),
             "trtllm": ("trtllm-serve ", "--tp_size ", "--max_batch_size ", "--max_seq_len 1250",
                        "--kv_cache_free_gpu_memory_fraction 0.9")}
    for option in json.loads(out)["options"]:
        for flag in flags[option["engine"]]:
            assert flag in option["launch"], (flag, option["launch"])
        assert f" {option['batch']}" in option["launch"]
        if option["pipeline_stages"] > 1 and option["engine"] == "vllm":
            assert f"--pipeline-parallel-size {option['pipeline_stages']}" in option["launch"]
        if option["kv_dtype"] == "fp8" and option["engine"] == "vllm":
            assert "--kv-cache-dtype fp8" in option["launch"]


def test_plan_side_by_side_and_no_answer(tmp_path):
    out = cli("plan", ROOT / "specs" / "catalog.kvspec", "--model", "llama_3_1_8b,qwen3_8b", "--hardware", "l4,h100_sxm",
              code=0).output
    assert "plan: llama_3_1_8b for workload" in out and "plan: qwen3_8b for workload" in out
    assert "launch each copy with: " in out
    # nothing serves 2,000 users of Llama-3.1-405B on one L4: exit 1, and why
    out = cli("plan", ROOT / "specs" / "catalog.kvspec", "--model", "llama_3_1_405b", "--hardware", "l4", code=1).output
    assert "no option serves the workload within its targets" in out and "the weights need" in out


def test_plan_table_and_errors():
    out = cli("plan", ROOT / "specs" / "catalog.kvspec", "--model", "llama_3_1_8b", "--hardware", "l4,h100_sxm", code=0).output
    assert "USD/month" in out and "h100_sxm" in out
    assert "no workload `chatt`" in cli("plan", ROOT / "specs" / "catalog.kvspec", "--workload", "chatt", "--model", "llama_3_1_8b", code=2).output
    assert "name the model" in cli("plan", ROOT / "specs" / "catalog.kvspec", code=2).output


def test_plan_reads_no_deployment_unless_a_block_does(tmp_path):
    """The imported deployments are left out of the plan's program; a block that reads one brings them back."""
    plain = spec(tmp_path, batch=64)
    given = ["--model", "llama_3_1_70b", "--hardware", "h100_sxm", "--max-gpus", "4", "--json"]
    expected = json.loads(cli("plan", plain, *given, code=0).output)
    importer = tmp_path / "imports.kvspec"
    importer.write_text(f'import "{plain}"\n')
    assert json.loads(cli("plan", importer, *given, code=0).output) == expected
    reader = tmp_path / "reader.kvspec"
    reader.write_text(f'import "{plain}"\nworkload w "W" extends chat_workload {{\n    users = d.batch * 10\n}}\n')
    planned = json.loads(cli("plan", reader, *given, "--workload", "w", code=0).output)
    assert planned["options"] and all(o["replicas"] * o["batch"] >= 640 for o in planned["options"])


RATE_WORKLOAD = '''import "catalog:models/llama_3_1_70b.kvspec"
import "catalog:hardware/h100_sxm.kvspec"

workload chat_rate "40 requests/s" {
    prompt_tokens = 1000 tokens
    output_tokens = 250 tokens
    requests_per_second = 40
    latency_percentile = 0.99
    ttft_target = 2 s
    tpot_target = 50 ms
}
'''


def test_plan_of_a_rate_sizes_the_copies_by_the_rate(tmp_path):
    """A workload given as a rate has no users to divide: the copies are the fewest that keep up with it within the
    targets at the percentile, as `eval` of the option says (and one copy fewer does not)."""
    path = tmp_path / "rate.kvspec"
    path.write_text(RATE_WORKLOAD)
    out = json.loads(cli("plan", path, "--model", "llama_3_1_70b", "--workload", "chat_rate", "--engine", "vllm",
                         "--json", code=0).output)
    best = out["options"][0]
    assert best["replicas"] > 1 and best["batch"] > 1, best
    assert best["verdict"].startswith("meets the workload: 40.00 requests/s")
    deployment = tmp_path / "option.kvspec"
    deployment.write_text(RATE_WORKLOAD + f'''
deployment d "The plan's cheapest option" {{
    model = llama_3_1_70b
    hardware = h100_sxm
    engine = vllm
    workload = chat_rate
    gpus = {best["gpus"]}
    weight_dtype = {best["weight_dtype"]}
    kv_dtype = {best["kv_dtype"]}
    batch = {best["batch"]}
    replicas = {best["replicas"]}
}}
''')
    assert cell(deployment, "meets_targets") is True
    assert cell(deployment, "meets_targets", f"d.replicas={best['replicas'] - 1}") is False
