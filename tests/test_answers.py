"""One answer everywhere: engine-sized answers, complete searches, the verdict, what to launch.

- A deployment that names an engine is sized by that engine's accounting:
  `batch = ?` never exceeds the engine's own concurrency.
- `solve` for an integer cell finds every window where its condition holds
  (property-tested against evaluating every value, on generated deployments).
- The verdict is one prelude cell: `eval`, the Plan sheet (recalculated by
  LibreOffice) and `plan` print the same sentence.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import openpyxl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cli_helpers import cli
from kvdsl.api import build_program, parse_setting
from kvdsl.evaluate import evaluate
from kvdsl.search import Feasibility
from kvdsl.windows import search_answer
from workbook_helpers import CATALOG, destination, eval_json, export, libreoffice, named, recalculate, set_typed

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llamacpp")


def values(path, *sets) -> dict:
    program = build_program([str(path)], [parse_setting(s) for s in sets])
    from kvdsl.api import solve_unknowns

    base = evaluate(program)
    solved = solve_unknowns(program, base)
    return evaluate(program, solved, known=base) if solved else base


# ---- the chosen engine sizes the deployment ----------------------------------------------

QWEN_ON_H100 = """
import "{root}/specs/models/qwen3_32b.kvspec"
import "{root}/specs/hardware/h100_sxm.kvspec"
import "{root}/specs/hardware/mi300x.kvspec"
deployment q "Qwen3-32B on 1 x H100" {{
    model = qwen3_32b
    hardware = h100_sxm
    engine = {engine}
    context = 8K
    batch = ?
}}
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_solved_batch_is_what_the_engine_holds(tmp_path, engine):
    spec = tmp_path / "q.kvspec"
    spec.write_text(QWEN_ON_H100.format(root=ROOT, engine=engine))
    v = values(spec)
    batch = v[("q", "batch")]
    assert batch == v[("q", "max_batch")] and v[("q", "fits")] is True
    assert batch <= math.floor(v[("q", "engine_max_concurrency")])
    # one more is more than the engine holds
    assert values(spec, f"q.batch={batch + 1}")[("q", "fits")] is False
    if engine == "vllm":
        # vLLM's own count: the blocks but the null one, over the pages a request takes
        assert batch == (v[("q", "vllm.num_blocks")] - 1) // v[("q", "vllm.pages_per_request")]
        assert v[("q", "ideal_max_batch")] > batch  # the ideal accounting would promise more


def test_the_engine_refuses_what_its_rules_refuse(tmp_path):
    spec = tmp_path / "q.kvspec"
    spec.write_text(QWEN_ON_H100.format(root=ROOT, engine="vllm").replace("batch = ?", "batch = 1"))
    v = values(spec, "q.kv_dtype=q4_0")  # vLLM stores no q4_0 cache
    assert v[("q", "fits")] is False and v[("q", "verdict")] == "does not run: vLLM does not store a q4_0 KV cache"
    v = values(spec, "q.hardware=mi300x", "q.engine=trtllm")
    assert v[("q", "fits")] is False and "TensorRT-LLM does not run on mi300x GPUs" in v[("q", "verdict")]


# ---- complete search: every window, against evaluating every value ------------------------

GENERATED = """
model m "A generated model" {{
    layers = {layers}
    heads = {heads}
    kv_heads = {kv_heads}
    head_dim = {head_dim}
    params = {params}
    hidden_size = {hidden}
    vocab_size = 32000
}}
hardware h "A generated GPU" {{
    memory = {memory} GiB
    bandwidth = {bandwidth} TB/s
    flops_bf16 = 500 TFLOP/s
    interconnect_bandwidth = 400 GB/s
}}
workload w "A generated workload" {{
    prompt_tokens = {prompt} tokens
    output_tokens = {output} tokens
    users = {users}
    ttft_target = {ttft} s
    tpot_target = {tpot} ms
}}
deployment d "A generated deployment" {{
    model = m
    hardware = h
    workload = w
    engine = {engine}
    gpus = {gpus}
    replicas = {replicas}
    batch = {batch}
}}
"""

deployments = st.fixed_dictionaries({
    "layers": st.integers(4, 48), "heads": st.sampled_from([8, 16, 32]), "kv_ratio": st.sampled_from([1, 2, 4, 8]),
    "head_dim": st.sampled_from([64, 128]), "params": st.integers(1, 30), "memory": st.integers(8, 96),
    "bandwidth": st.sampled_from([1, 2, 3.35, 8]), "prompt": st.integers(256, 16384), "output": st.integers(64, 2048),
    "users": st.integers(2, 3000), "ttft": st.sampled_from([1, 2, 5]), "tpot": st.integers(15, 120),
    "engine": st.sampled_from(ENGINES), "gpus": st.sampled_from([1, 2]), "replicas": st.integers(1, 40),
    "batch": st.integers(1, 64),
})

EVERY = 400  # the values every search is checked against, one by one
# (30 generated deployments per search: each is checked at every one of those values, on the exact rules of the
# five passes and the queue, about half a second each)


def program_of(tmp_path_factory, d: dict):
    kv_heads = max(d["heads"] // d["kv_ratio"], 1)
    text = GENERATED.format(layers=d["layers"], heads=d["heads"], kv_heads=kv_heads, head_dim=d["head_dim"],
                            params=f"{d['params']}e9", hidden=d["heads"] * d["head_dim"], memory=d["memory"],
                            bandwidth=d["bandwidth"], prompt=d["prompt"], output=d["output"], users=d["users"],
                            ttft=d["ttft"], tpot=d["tpot"], engine=d["engine"], gpus=d["gpus"],
                            replicas=d["replicas"], batch=d["batch"])
    path = tmp_path_factory.mktemp("generated") / "d.kvspec"
    path.write_text(text)
    program = build_program([str(path)])
    return program, evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))


def every_window(feasible, top: int) -> list:
    """[(low, high)] where the condition holds, trying every value from 1 to top."""
    spans, low = [], None
    for n in range(1, top + 1):
        if feasible(n) and low is None:
            low = n
        elif not feasible(n) and low is not None:
            spans.append((low, n - 1))
            low = None
    if low is not None:
        spans.append((low, None))
    return spans


def check_answer(program, base, cell: str, direction: str) -> None:
    target = ("d", cell)
    feasible = Feasibility(program, base, target, ("d", "meets_targets"))
    found = search_answer(program, "d", cell, base)
    assert found.constraint == "meets_targets"
    want = every_window(feasible, EVERY)
    got = [(low, high if high is None or high < EVERY else None) for low, high in found.windows.spans
           if low <= EVERY]
    assert got == want, (cell, got, want)
    if not want:
        assert found.value is None
        return
    assert found.value is not None and feasible(found.value) and found.verified
    assert found.windows.direction == direction
    if direction == "max":  # the top of the last window
        assert not feasible(int(found.value) + 1) and found.value == want[-1][1]
    else:  # the bottom of the first
        assert found.value == want[0][0] and (found.value == 1 or not feasible(int(found.value) - 1))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(d=deployments)
def test_a_solved_batch_is_the_top_of_every_window_there_is(tmp_path_factory, d):
    program, base = program_of(tmp_path_factory, d)
    if base[("d", "max_batch")] >= EVERY - 1:  # beyond what is checked one by one
        return
    check_answer(program, base, "batch", "max")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(d=deployments)
def test_solved_replicas_are_the_fewest_that_meet_the_workload(tmp_path_factory, d):
    program, base = program_of(tmp_path_factory, d)
    if math.ceil(d["users"] / d["batch"]) >= EVERY - 1:
        return
    check_answer(program, base, "replicas", "min")


def test_the_glm_air_window_of_the_catalog():
    """Twelve copies of GLM-4.5-Air on 4 x H100 under vLLM: too few users below 167, TPOT missed above 197."""
    out = json.loads(cli("solve", SPECS / "deployments" / "glm_4_5_air_h100x4.kvspec", "--for", "batch", "--json",
                         code=0).stdout)
    assert out["windows"] == [[167, 197]] and out["value"] == 197 and out["constraint"] == "meets_targets"
    spec = SPECS / "deployments" / "glm_4_5_air_h100x4.kvspec"
    assert values(spec, "glm_4_5_air_h100x4.batch=197")[("glm_4_5_air_h100x4", "meets_targets")] is True
    for batch in (166, 198):
        assert values(spec, f"glm_4_5_air_h100x4.batch={batch}")[("glm_4_5_air_h100x4", "meets_targets")] is False


def test_no_answer_exits_1_with_the_nearest_verdict():
    spec = SPECS / "deployments" / "glm_4_5_air_h100x4.kvspec"
    out = cli("solve", spec, "--for", "batch", "--set", "glm_4_5_air_h100x4.replicas=1", code=1).stdout
    assert "no `batch` meets the workload's targets; nearest, at batch " in out and "fits but serves " in out


# ---- one verdict everywhere ----------------------------------------------------------------

def test_costs_of_a_deployment_that_does_not_fit_are_null():
    cells = json.loads(cli("eval", SPECS / "deployments" / "llama_3_1_405b_a100x4.kvspec", "--json", code=1).stdout
                       )["blocks"]["llama_3_1_405b_a100x4"]["cells"]
    for cell in ("cost_per_month", "cost_per_hour", "cost_per_million_output_tokens", "tpot_seconds", "ttft_seconds",
                 "output_tokens_per_second", "users_served"):
        assert cells[cell]["value"] is None, cell
    assert cells["verdict"]["value"].startswith("does not fit: the weights need 189.0 GiB per GPU")
    text = cli("eval", SPECS / "deployments" / "llama_3_1_405b_a100x4.kvspec", "--cells", "cost_per_month", code=1).stdout
    assert "cost_per_month  n/a" in text


def test_plan_verdicts_are_evals(tmp_path):
    """Each option's verdict and launch line are the cells `eval` gives the same deployment."""
    plan = json.loads(cli("plan", CATALOG, "--model", "qwen3_8b", "--hardware", "l40s,h100_sxm", "--json", code=0).stdout)
    for option in plan["options"][:4]:
        spec = tmp_path / f"{option['engine']}_{option['gpus']}.kvspec"
        spec.write_text(f'import "{ROOT}/specs/catalog.kvspec"\n'
                        f'deployment o "o" {{\n    model = qwen3_8b\n    hardware = {option["hardware"]}\n'
                        f'    workload = chat_workload\n    engine = {option["engine"]}\n    gpus = {option["gpus"]}\n'
                        f'    pipeline_stages = {option["pipeline_stages"]}\n    kv_dtype = {option["kv_dtype"]}\n'
                        f'    weight_dtype = {option["weight_dtype"]}\n    batch = {option["batch"]}\n'
                        f'    replicas = {option["replicas"]}\n}}\n')
        v = values(spec)
        assert (option["verdict"], option["launch"]) == (v[("o", "verdict")], v[("o", "launch_command")])
        assert option["batch"] <= math.floor(v[("o", "engine_max_concurrency")])


def plan_verdicts(wb_formulas, wb_values) -> dict:
    """deployment -> the verdict its Plan section shows (the cell `=NAME.verdict`)."""
    out = {}
    ws = wb_formulas["Plan"]
    for row in ws.iter_rows():
        for c in row:
            if isinstance(c.value, str) and c.value.startswith("=") and c.value.endswith(".verdict") and c.column == 2:
                block = c.value[1:-len(".verdict")].lstrip("_")
                out[block] = wb_values["Plan"][c.coordinate].value
    return out


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    """gpt-oss-120b on 2 x H200 under vLLM, as exported, and with 3 GPUs typed on its Plan page; both recalculated."""
    spec = SPECS / "deployments" / "gpt_oss_120b_h200x2_vllm.kvspec"
    folder = tmp_path_factory.mktemp("gpt_oss")
    out = export(spec, folder / "two.xlsx")
    wb = openpyxl.load_workbook(out)
    set_typed(wb, "gpt_oss_120b_h200x2_vllm.gpus", 3)
    wb.save(folder / "three.xlsx")
    two, three = recalculate([out, folder / "three.xlsx"])
    return openpyxl.load_workbook(out), openpyxl.load_workbook(two, data_only=True), openpyxl.load_workbook(three, data_only=True)


@libreoffice
def test_three_gpus_typed_in_the_workbook_break_the_tensor_parallel_rule(gpt_oss):
    formulas, two, three = gpt_oss
    block = "gpt_oss_120b_h200x2_vllm"
    assert named(two, f"{block}.fits") is True and named(three, f"{block}.fits") is False
    verdict = plan_verdicts(formulas, three)[block]
    assert verdict.startswith("does not run: vLLM splits the model's 64 attention heads") and "tensor-parallel rule" in verdict
    # (`eval --set gpus=3` refuses it outright: `require engine_runs_tensor_parallel`)
    # the verdict cell turns red when it does not serve its workload (the prelude's `serves_workload`, which reads
    # `fits`): recalculated, that cell is false
    ws = formulas["Plan"]
    cell = next(c for row in ws.iter_rows() for c in row if c.value == f"={block}.verdict" and c.column == 2)
    rules = [r for rng in ws.conditional_formatting for r in rng.rules if cell.coordinate in rng.sqref]
    red = [r for r in rules if r.dxf is not None and r.dxf.fill is not None and r.dxf.fill.bgColor is not None]
    assert red and red[0].formula[0] == f"NOT({block}.serves_workload)"
    assert named(three, f"{block}.serves_workload") is False
    # costs of what cannot run read n/a on the Plan page, #N/A in the block's own cells
    assert named(three, f"{block}.cost_per_month") == "#N/A"
    plan_values = [c.value for row in three["Plan"].iter_rows() for c in row if c.value is not None]
    assert not any(isinstance(v, str) and v.startswith("#") for v in plan_values)
    # the GPU count is offered from the counts vLLM runs
    gpus = destination(formulas, f"{block}.gpus")
    typed = formulas[gpus.value.split("!")[0].strip("='")][gpus.value.split("!")[1].replace("$", "")]
    offered = [dv for dv in formulas["Plan"].data_validations.dataValidation if typed.coordinate in str(dv.sqref)]
    assert offered and offered[0].formula1 == '"1,2,4,8,16,32,64"' and offered[0].errorStyle == "stop"
