"""Predicted against measured for every published benchmark row.

    PYTHONPATH=. python benchmarks/calibrate.py [--set bandwidth_efficiency=0.7 ...] [--rows]

Every row of benchmarks/data/ (copied from the published TensorRT-LLM tables,
see benchmarks/data/README.md) whose model and GPU the catalog holds becomes a
deployment of the catalog's model on the catalog's hardware; kvdsl evaluates
them all at once with the prelude's performance rules (one set of efficiency
defaults for every row) and the script prints, per table, each row's
prediction, the measurement and their ratio, then the median ratio and the
share of rows within a factor 2.  The rows it cannot express are listed with
the reason.

How each kind of table is read:
- max throughput (perf-overview v0.17 and v0.21, the H200 blogs): requests at
  an unbounded rate, so the batch is what the cache holds (the ideal
  `max_batch` at prompt + output tokens, at most MAX_BATCH), unless the row
  states its batch;
- static batch (v0.5.0 tables, the H100-vs-A100 blog): the stated batch;
  "time to first token" is the prefill of one prompt;
- online serving (v0.14): a request rate, not a batch; the concurrency the
  server held is the rate times each request's time in the system (Little's
  law: requests/s x (TTFT + output x ITL)), and the prediction is made at that
  batch.  TTFT rows of a saturated server (fewer requests served than offered,
  or every request at once) measure the queue, not the server: skipped.
A row "per GPU" is compared with output_tokens_per_second_per_gpu, a "total"
one (and the v0.5.0 "unstated" ones, which only read consistently as totals)
with output_tokens_per_second.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
sys.path.insert(0, str(ROOT))

MAX_BATCH = 2048  # trtllm-bench's largest default max_batch_size

MODELS = {
    "llama-3.1-8b": "llama_3_1_8b",
    "llama-3.1-70b": "llama_3_1_70b",
    "llama-3.1-405b": "llama_3_1_405b",
    "llama-3.3-70b": "llama_3_3_70b_instruct",
    "mistral-7b": "mistral_7b_v0_1",
    "mixtral-8x7b": "mixtral_8x7b_v0_1",
    "llama-2-7b": "llama_2_7b_hf",
    "llama-2-13b": "llama_2_13b_hf",
    "llama-2-70b": "llama_2_70b_hf",
    "gpt-j-6b": "gpt_j_6b",
    "falcon-180b": "falcon_180b",
    "mixtral-8x22b": "mixtral_8x22b_v0_1",
    "llama-4-maverick-17b-128e": "llama_4_maverick_17b_128e",
}
GPUS = {
    "H100 SXM 80GB": "h100_sxm",
    "H200 SXM 141GB": "h200",
    "GH200 96GB HBM3": "gh200",
    "GH200 (HBM variant not stated)": "gh200",
    "L40S 48GB": "l40s",
    "A100 SXM4 80GB": "a100_80gb",
    "B200 180GB": "b200",
    "GB200": "gb200",
}
DTYPES = {"FP8": "fp8", "FP16": "fp16", "BF16": "bf16", "FP4": "nvfp4"}

TABLES = {
    "max throughput": ["trtllm_perf_overview_v0.17.json", "trtllm_perf_overview_v0.21.json",
                       "trtllm_blog_h200_launch_v0.5.0.json", "trtllm_blog_falcon180b_h200_v0.7a.json"],
    "static batch": ["trtllm_performance_v0.5.0.json", "trtllm_blog_h100_vs_a100_v0.5.0.json"],
    "online serving": ["trtllm_online_serving_v0.14.json"],
}
METRICS = {"output_throughput", "ttft", "ttft_mean", "itl_mean"}


def load_rows():
    """(table, row) for every performance row, and (row, reason) for those skipped."""
    rows, skipped = [], []
    for table, files in TABLES.items():
        for name in files:
            data = json.loads((DATA / name).read_text())
            points = {}
            for row in data["rows"]:
                points.setdefault(row["point_id"], {})[row["metric"]] = row["value"]
            for row in data["rows"]:
                if row["metric"] not in METRICS:
                    continue
                reason = None
                if row["model_key"] not in MODELS:
                    reason = f"model {row['model_key']} is not in the catalog"
                elif row["gpu"] not in GPUS:
                    reason = f"GPU {row['gpu']} is not in the catalog"
                elif row["weights_dtype"] not in DTYPES:
                    reason = f"weights {row['weights_dtype']}"
                elif (row["tp"] or 1) * (row["pp"] or 1) != row["gpus"] and table != "max throughput":
                    reason = "parallel split not stated"
                elif row["metric"] == "ttft_mean" and _saturated(row, points[row["point_id"]]):
                    reason = "TTFT of a saturated server (requests served below the offered rate): queueing, not the server"
                if reason:
                    skipped.append((name, row, reason))
                else:
                    rows.append((table, name, row, points[row["point_id"]]))
    return rows, skipped


def _saturated(row, point) -> bool:
    offered = row["request_rate_qps"]
    return not isinstance(offered, (int, float)) or point["request_throughput"] < 0.95 * offered


def batch_of(table, row, point, max_batch):
    if row.get("max_batch"):
        return row["max_batch"]
    if table == "online serving":
        ms = (point["ttft_mean"] + row["osl"] * point["itl_mean"]) / 1000
        return max(1, round(point["request_throughput"] * ms))
    return max(1, min(max_batch, MAX_BATCH))


def setup(row):
    """What a deployment of the row is made of: rows that agree share one.

    GPU count and request lengths are not part of it: each row sets them on
    its deployment (`Point`), as a workload's lengths would.
    """
    return (row["model_key"], row["gpu"], row["pp"] or 1, row["weights_dtype"])


def lengths(row) -> dict:
    """The row's request: the deployment cells a workload of these lengths sets."""
    isl, osl = row["isl"], row["osl"] or 128
    return {"prompt_tokens": isl, "output_tokens": osl, "context": isl + osl}


def spec_text(setups, rows):
    """A spec with one deployment per setup, at the GPU count and lengths of its first row."""
    first = {}
    for _, _, row, _ in rows:
        first.setdefault(setup(row), row)
    imports = {f"specs/models/{MODELS[s[0]]}.kvspec" for s in setups}
    imports |= {f"specs/hardware/{GPUS[s[1]]}.kvspec" for s in setups}
    lines = [f'import "{ROOT / p}"' for p in sorted(imports)]
    workloads = set()
    for i, key in enumerate(setups):
        model, gpu, stages, weights = key
        row = first[key]
        isl, osl, gpus = row["isl"], row["osl"] or 128, row["gpus"]
        w = f"w_{isl}_{osl}"
        if w not in workloads:
            workloads.add(w)
            lines.append(f'workload {w} "{isl} in, {osl} out" {{ prompt_tokens = {isl} tokens; output_tokens = {osl} tokens }}')
        dtype = DTYPES[weights]
        kv = "fp8" if dtype in ("fp8", "nvfp4") else "fp16"
        # the 8-GPU rows of the Falcon blog state no split: read as tensor parallel over 8
        lines.append(
            f'deployment r{i} "{model} on {gpu}" {{\n'
            f"    model = {MODELS[model]}\n    hardware = {GPUS[gpu]}\n"
            f"    gpus = {gpus}\n    pipeline_stages = {stages}\n    workload = {w}\n"
            f"    weight_dtype = {dtype}\n    kv_dtype = {kv}\n    utilization = 0.95\n}}")
    return "\n".join(lines) + "\n"


def predict(settings=()):
    """[(table, file, row, batch, predicted, measured)] and the skipped rows."""
    from kvdsl.api import evaluate_paths, parse_setting
    from kvdsl.errors import ErrorList
    from kvdsl.plan_search import Point

    rows, skipped = load_rows()
    setups = list(dict.fromkeys(setup(row) for _, _, row, _ in rows))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "benchmarks.kvspec"
        path.write_text(spec_text(setups, rows))
        try:
            program, base = evaluate_paths([str(path)], [parse_setting(s) for s in settings])
        except ErrorList as errors:
            raise SystemExit("\n".join(str(e) for e in errors.errors)) from None
    index = {key: f"r{i}" for i, key in enumerate(setups)}
    points = {}
    out = []
    for table, name, row, point in rows:
        block = index[setup(row)]
        if block not in points:
            points[block] = Point(program, base, block, also=("prompt_tokens", "output_tokens", "context"))
        request = lengths(row)
        max_batch = points[block].at(row["gpus"], 1, 1, **request)["max_batch"]
        batch = batch_of(table, row, point, int(max_batch))
        values = points[block].at(row["gpus"], batch, 1, **request)
        v = lambda cell: float(values[cell])  # noqa: E731
        metric = row["metric"]
        # the roofline's figures: a measured run held its batch whatever kvdsl's memory accounting says
        if metric in ("ttft", "ttft_mean"):
            predicted = v("roofline_ttft_seconds") * 1000
        elif metric == "itl_mean":
            predicted = v("roofline_tpot_seconds") * 1000
        elif row["osl"] is None:  # a single stream's decode rate
            predicted = 1 / v("roofline_tpot_seconds")
        elif row["per"] == "per_gpu":
            predicted = batch / v("roofline_tpot_seconds") / row["gpus"]
        else:
            predicted = batch / v("roofline_tpot_seconds")
        out.append((table, name, row, batch, predicted, row["value"]))
    return out, skipped


def summary(results):
    """{table: (rows, median ratio, share within [0.5, 2])}."""
    by_table = {}
    for table, _, _, _, predicted, measured in results:
        by_table.setdefault(table, []).append(predicted / measured)
    return {t: (len(r), statistics.median(r), sum(0.5 <= x <= 2 for x in r) / len(r)) for t, r in by_table.items()}


def main(argv):
    settings = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    results, skipped = predict(settings)
    for table, name, row, batch, predicted, measured in results:
        print(f"{table:15} {row['model_key']:15} {row['gpu'][:14]:14} tp{row['tp'] or row['gpus']} {row['isl']:>5}/{str(row['osl']):>5} "
              f"{row['metric']:17} batch {batch:>5}  predicted {predicted:10,.1f}  measured {measured:10,.1f}  ratio {predicted / measured:5.2f}")
    print()
    reasons = {}
    for name, row, reason in skipped:
        reasons.setdefault(reason, []).append(name)
    for reason, names in sorted(reasons.items()):
        print(f"skipped {len(names):4} rows: {reason}")
    print()
    for table, (n, median, share) in summary(results).items():
        print(f"{table:15} {n:4} rows  median predicted/measured {median:.2f}  within [0.5, 2]: {share:.0%}")


if __name__ == "__main__":
    main(sys.argv[1:])
