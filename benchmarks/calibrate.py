"""Predicted against measured for every published benchmark row, and the calibration table's fit.

    PYTHONPATH=. python benchmarks/calibrate.py [--set h100_sxm.attention_efficiency=0.6 ...] [--rows] [--fit]

Every row of benchmarks/data/ (copied from the published TensorRT-LLM tables,
see benchmarks/data/README.md) whose model and GPU the catalog holds is a
deployment of the catalog's model on the catalog's hardware, served by the
prelude's TensorRT-LLM engine; kvdsl evaluates them all at once (one program,
every row a row of NumPy arrays: kvdsl/rows.py) with the prelude's performance
rules and its calibration table (kvdsl/prelude/calibration.kvspec: one table
for every row).  The script prints, per table, the number of rows, the median
of predicted / measured and the shares within [0.8, 1.25] and [0.5, 2]; then
the same for a table fitted on half the rows (every other measured point of
each model on each GPU, in each table) and read on the other half.  `--rows` prints every row, `--fit`
the table fitted on every row, as calibration.kvspec writes it.  The rows it
cannot express are listed with the reason.

How each kind of table is read:
- max throughput (perf-overview v0.17 and v0.21): trtllm-bench's runs, requests
  at an unbounded rate: the batch is what the engine runs (`max_batch`: its
  cache, at most trtllm-bench's batch limit, `trtllm.bench`), and the answer is
  the copy's capacity;
- static batch (v0.5.0 tables, the H100-vs-A100 blog, and the H200 and
  Falcon-180B blogs of v0.5 and v0.7, whose batches are published): the stated
  batch, in a static batch (`static_batching`): "time to first token" is the
  prefill of the whole batch's prompts;
- online serving (v0.14): requests arriving at the rate the server completed
  (`requests_per_second`; fixed lengths: `length_variation` 0): the mean TTFT
  (with its queueing), the mean time per token and the answer tokens per
  second.  The rows of a saturated server (every request at once, or a rate
  at the most the server served at any rate) measure the length of the run,
  not the server: skipped.
A row "per GPU" is compared with the tokens per second per GPU, a "total" one
(and the v0.5.0 "unstated" ones, which only read consistently as totals) with
the copy's.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
sys.path.insert(0, str(ROOT))

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
GENERATIONS = ("ampere", "ada", "hopper", "blackwell")

TABLES = {
    "max throughput": ["trtllm_perf_overview_v0.17.json", "trtllm_perf_overview_v0.21.json"],
    "static batch": ["trtllm_performance_v0.5.0.json", "trtllm_blog_h100_vs_a100_v0.5.0.json",
                     "trtllm_blog_h200_launch_v0.5.0.json", "trtllm_blog_falcon180b_h200_v0.7a.json"],
    "online serving": ["trtllm_online_serving_v0.14.json"],
}
METRICS = {"output_throughput", "ttft", "ttft_mean", "itl_mean"}
# the cells of the template deployment every row sets, and those of its workload
VARIED = ("gpus", "pipeline_stages", "batch", "static_batching", "trtllm.bench", "trtllm.xqa", "trtllm.free_gpu_memory_fraction")
WORKLOAD = ("prompt_tokens", "output_tokens", "requests_per_second", "length_variation")
STAND_INS = {"model": "cal__model", "hardware": "cal__hardware", "weight_dtype": "cal__weights",
             "expert_weight_dtype": "cal__weights", "kv_dtype": "cal__kv"}
OUTPUTS = ("max_batch", "capacity", "roofline_ttft_seconds", "roofline_tpot_seconds", "compute_bits", "expert_compute_bits", "moe")
# the calibration table's cells a fit moves, each per generation, and the deployment's own
TABLE_CELLS = ("memory_efficiency", "dense_gemm_efficiency_bf16", "dense_gemm_efficiency_fp8", "dense_gemm_efficiency_fp4",
               "moe_gemm_efficiency_bf16", "moe_gemm_efficiency_fp8", "moe_gemm_efficiency_fp4", "attention_efficiency",
               "communication_efficiency")
GLOBAL_CELLS = ("step_overhead", "allreduce_latency", "request_overhead")
# where a fit starts: every generation alike
START = {"memory_efficiency": 0.8, "dense_gemm_efficiency_bf16": 0.6, "dense_gemm_efficiency_fp8": 0.5,
         "dense_gemm_efficiency_fp4": 0.4, "moe_gemm_efficiency_bf16": 0.4, "moe_gemm_efficiency_fp8": 0.3,
         "moe_gemm_efficiency_fp4": 0.25, "attention_efficiency": 0.6, "communication_efficiency": 0.7,
         "step_overhead": 0.002, "allreduce_latency": 10e-6, "request_overhead": 0.005}
STEPS = (0.6, 0.75, 0.85, 0.93, 1.0, 1.07, 1.18, 1.33, 1.6)  # the factors one round of the fit tries per cell
MOST = 0.95  # no kernel reaches a datasheet peak: the most a fitted efficiency may be


# ---- the published rows ---------------------------------------------------------------

def load_rows():
    """(table, file, row, point) for every performance row, and (file, row, reason) for those skipped."""
    rows, skipped = [], []
    for table, files in TABLES.items():
        for name in files:
            data = json.loads((DATA / name).read_text())
            points, series = {}, {}
            for row in data["rows"]:
                points.setdefault(row["point_id"], {})[row["metric"]] = row["value"]
                if row["metric"] == "request_throughput":  # the most a server served at any rate: its capacity
                    key = (row["model_key"], row["gpu"], row["isl"], row["osl"])
                    series[key] = max(series.get(key, 0), row["value"])
            for row in data["rows"]:
                key = (row["model_key"], row["gpu"], row["isl"], row["osl"])
                points[row["point_id"]]["most_served"] = series.get(key, 0)
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
                elif "not itemised" in (row["parallelism"] or ""):
                    reason = "parallel split not stated (tensor, pipeline or data parallel)"
                elif table == "online serving" and _saturated(row, points[row["point_id"]]):
                    reason = "a saturated server (offered at or above the most it served): the length of the run, not the server"
                if reason:
                    skipped.append((name, row, reason))
                else:
                    rows.append((table, name, row, points[row["point_id"]]))
    return rows, skipped


def _saturated(row, point) -> bool:
    """Whether the server could not keep up: every request at once, or a rate at the most it served then."""
    offered = row["request_rate_qps"]
    return not isinstance(offered, (int, float)) or offered >= 0.95 * point["most_served"]


def _settings(table, row, point) -> dict:
    """What the row sets on the template deployment, its workload and the stand-ins."""
    from fractions import Fraction

    dtype = DTYPES[row["weights_dtype"]]
    online = table == "online serving"
    # requests arrive at the offered rate; a saturated server runs all it can hold, as a closed loop does
    rate = Fraction(str(row["request_rate_qps"])) if online and not _saturated(row, point) else 0
    return {
        "model": MODELS[row["model_key"]], "hardware": GPUS[row["gpu"]], "weight_dtype": dtype, "expert_weight_dtype": dtype,
        # FP8 and NVFP4 checkpoints keep an FP8 cache (trtllm-bench: bench/build/build.py, _KV_CACHE_MAP)
        "kv_dtype": "fp8" if dtype in ("fp8", "nvfp4") else "fp16",
        "gpus": row["gpus"], "pipeline_stages": row["pp"] or 1, "batch": row.get("max_batch") or 1,
        "static_batching": table == "static batch", "trtllm.bench": table == "max throughput",
        # TensorRT-LLM decodes grouped-query attention with its XQA kernel from 0.8 (and the 0.7 preview)
        "trtllm.xqa": not row["engine_version"].startswith("0.5"),
        # trtllm-bench's runs give 0.95 of the free memory to the cache; Triton's default is 0.9
        "trtllm.free_gpu_memory_fraction": Fraction(9, 10) if online else Fraction(95, 100),
        ("cal__workload", "prompt_tokens"): row["isl"], ("cal__workload", "output_tokens"): row["osl"] or 128,
        ("cal__workload", "requests_per_second"): rate,
        ("cal__workload", "length_variation"): 0,
    }


def spec_text(rows) -> str:
    """The stand-ins, the workload and the template deployment every row sets."""
    models = sorted({MODELS[row["model_key"]] for _, _, row, _ in rows})
    devices = sorted({GPUS[row["gpu"]] for _, _, row, _ in rows})
    lines = [f'import "{ROOT}/specs/models/{m}.kvspec"' for m in models]
    lines += [f'import "{ROOT}/specs/hardware/{h}.kvspec"' for h in devices]
    lines += [f'model cal__model "a published row\'s model" extends {models[0]} {{\n}}',
              f'hardware cal__hardware "a published row\'s GPU" extends {devices[0]} {{\n}}',
              'format cal__weights "a published row\'s weights" extends fp16 {\n}',
              'format cal__kv "a published row\'s KV cache" extends fp16 {\n}',
              'workload cal__workload "a published row\'s requests" {\n    prompt_tokens = 128 tokens\n    output_tokens = 128 tokens\n}',
              'deployment cal "a published row" {\n' + "".join(f"    {cell} = {block}\n" for cell, block in STAND_INS.items()) +
              "    workload = cal__workload\n    engine = trtllm\n    trtllm.bench = false\n}"]
    return "\n".join(lines) + "\n"


# ---- one program, every row ---------------------------------------------------------

class Calibration:
    """Every expressible row, evaluated at once; predictions at any calibration table."""

    def __init__(self, settings=()):
        import numpy as np

        from kvdsl.api import parse_setting
        from kvdsl.build import build_program
        from kvdsl.evaluate import evaluate
        from kvdsl.loader import overlaid
        from kvdsl.rows import Rows

        self.rows, self.skipped = load_rows()
        spec = ROOT / "benchmarks" / "<calibration>.kvspec"
        with overlaid({spec: spec_text(self.rows)}):
            program = build_program([str(spec)], [parse_setting(s) for s in settings])
        base = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items() if rc.form == "require"))
        varied = {("cal", c) for c in VARIED} | {("cal__workload", c) for c in WORKLOAD}
        varied |= {("cal__hardware", c) for c in TABLE_CELLS} | {("cal", c) for c in GLOBAL_CELLS}
        self.evaluator = Rows(program, base, "cal", OUTPUTS, varied, STAND_INS)
        self.settings = [_settings(t, r, p) for t, _, r, p in self.rows]
        self.columns = self.evaluator.columns(self.settings)
        self.generation = np.asarray([base[(GPUS[r["gpu"]], "generation")] for _, _, r, _ in self.rows], dtype=object)
        devices = {base[(gpu, "generation")]: gpu for gpu in sorted(set(GPUS.values()))}
        self.table = {(cell, g): float(base[(devices[g], cell)]) for cell in TABLE_CELLS for g in GENERATIONS}
        self.table.update({cell: float(base[("cal", cell)]) for cell in GLOBAL_CELLS})
        # the batch each row runs: the published one, or what the engine runs (its cache, its batch limit)
        self.first = first = self.evaluator.evaluate(self.columns)
        engine_batch = np.maximum(np.floor(np.nan_to_num(np.asarray(first[("cal", "max_batch")], dtype=float), nan=1)), 1)
        stated = np.asarray([bool(r.get("max_batch")) for _, _, r, _ in self.rows])
        self.columns[("cal", "batch")] = np.where(stated, self.columns[("cal", "batch")], engine_batch)
        self.measured = np.asarray([r["value"] for _, _, r, _ in self.rows], dtype=float)

    def predict(self, table=None, subset=None):
        """Predicted values of every row (or of `subset`, an index array) at a calibration table."""
        import numpy as np

        table = self.table if table is None else table
        index = np.arange(len(self.rows)) if subset is None else subset
        columns = {key: value[index] for key, value in self.columns.items()}
        generation = self.generation[index]
        for key, value in table.items():
            if isinstance(key, tuple):
                cell, g = key
                column = columns.get(("cal__hardware", cell))
                columns[("cal__hardware", cell)] = np.where(generation == g, value, column)
            else:
                columns[("cal", key)] = np.full(len(index), value)
        return self._metrics(self.evaluator.evaluate(columns), index)

    def _metrics(self, values, index):
        import numpy as np

        n = len(index)
        get = lambda cell: np.broadcast_to(np.asarray(values[("cal", cell)], dtype=float), (n,))  # noqa: E731
        capacity, ttft, tpot = get("capacity"), get("roofline_ttft_seconds"), get("roofline_tpot_seconds")
        out = np.empty(n)
        for j, i in enumerate(index):
            table, _, row, point = self.rows[i]
            osl = row["osl"] or 128
            metric = row["metric"]
            if metric in ("ttft", "ttft_mean"):
                out[j] = ttft[j] * 1000
            elif metric == "itl_mean":
                out[j] = tpot[j] * 1000
            elif row["osl"] is None:  # a single stream's decode rate
                out[j] = 1 / tpot[j]
            else:
                # a run of 500 requests ends with the last ones' answers: the rate it served, not the offered one
                rate = point.get("request_throughput") if table == "online serving" and not _saturated(row, point) else None
                tokens = (min(rate, capacity[j]) if rate else capacity[j]) * osl
                out[j] = tokens / row["gpus"] if row["per"] == "per_gpu" else tokens
        return out

    def ratios(self, table=None, subset=None):
        import numpy as np

        index = np.arange(len(self.rows)) if subset is None else subset
        return self.predict(table, index) / self.measured[index]

    def tables_of(self, index):
        return [self.rows[i][0] for i in index]

    def halves(self):
        """Two halves of the rows: every other measured point of each model's series on each GPU, in each table."""
        import numpy as np

        seen: dict = {}
        side = []
        for table, _, row, _ in self.rows:
            points = seen.setdefault((table, row["model_key"], row["gpu"]), {})
            side.append(points.setdefault(row["point_id"], len(points) % 2))
        side = np.asarray(side)
        return np.flatnonzero(side == 0), np.flatnonzero(side == 1)

    # ---- the fit ------------------------------------------------------------------

    def fit(self, subset=None, rounds: int = 3, start=None):
        """The calibration table that fits the rows of `subset` (all when None) best, cell by cell.

        The loss is the mean |ln(predicted / measured)| of each table, averaged over the tables, so that the
        small tables count as much as the large one.  Each round tries STEPS times every cell that some row
        reads, all candidates of a cell evaluated at once.
        """
        import numpy as np

        index = np.arange(len(self.rows)) if subset is None else np.asarray(subset)
        table = dict(start or self._start())
        tables = np.asarray(self.tables_of(index), dtype=object)
        names = sorted(set(tables))
        read = self._cells_read(index)
        for _ in range(rounds):
            for key in [k for k in table if k in read or not isinstance(k, tuple)]:
                candidates = [min(table[key] * f, MOST) if isinstance(key, tuple) else table[key] * f for f in STEPS]
                candidates = list(dict.fromkeys(candidates))
                losses = self._losses(table, key, candidates, index, tables, names)
                table[key] = candidates[int(np.argmin(losses))]
        # a cell no row reads takes the mean of its row's cells that some row reads (or keeps where it started)
        for cell in TABLE_CELLS:
            known = [table[(cell, g)] for g in GENERATIONS if (cell, g) in read]
            for g in GENERATIONS:
                if (cell, g) not in read and known:
                    table[(cell, g)] = sum(known) / len(known)
        return table

    def _start(self) -> dict:
        table = {(cell, g): START[cell] for cell in TABLE_CELLS for g in GENERATIONS}
        table.update({cell: START[cell] for cell in GLOBAL_CELLS})
        return table

    def _cells_read(self, index) -> set:
        """The (cell, generation) keys some row of `index` reads: its GPU's, at the precisions it computes in."""
        import numpy as np

        names = {4: "fp4", 8: "fp8", 16: "bf16"}
        bits = np.asarray(self.first[("cal", "compute_bits")], dtype=float)
        expert_bits = np.asarray(self.first[("cal", "expert_compute_bits")], dtype=float)
        moe = np.broadcast_to(np.asarray(self.first[("cal", "moe")]), (len(self.rows),))
        read = set()
        for i in index:
            g = str(self.generation[i])
            read |= {("memory_efficiency", g), ("attention_efficiency", g), ("communication_efficiency", g),
                     (f"dense_gemm_efficiency_{names[int(bits[i])]}", g)}
            if moe[i]:
                read.add((f"moe_gemm_efficiency_{names[int(expert_bits[i])]}", g))
        return read

    def _losses(self, table, key, candidates, index, tables, names):
        import numpy as np

        k = len(candidates)
        repeated = np.tile(index, k)
        trial = dict(table)
        trial.pop(key)
        predicted = self._predict_many(trial, key, candidates, repeated)
        ratios = (predicted / np.tile(self.measured[index], k)).reshape(k, len(index))
        errors = np.abs(np.log(np.where(ratios > 0, ratios, np.nan)))
        errors = np.where(np.isnan(errors), 5.0, errors)
        return [np.mean([errors[c][tables == t].mean() for t in names]) for c in range(k)]

    def _predict_many(self, table, key, candidates, repeated):
        import numpy as np

        columns = {name: value[repeated] for name, value in self.columns.items()}
        generation = self.generation[repeated]
        n = len(repeated) // len(candidates)
        for other, value in table.items():
            self._set(columns, generation, other, np.full(len(repeated), value))
        self._set(columns, generation, key, np.repeat(np.asarray(candidates, dtype=float), n))
        return self._metrics(self.evaluator.evaluate(columns), repeated)

    @staticmethod
    def _set(columns, generation, key, values):
        import numpy as np

        if isinstance(key, tuple):
            cell, g = key
            columns[("cal__hardware", cell)] = np.where(generation == g, values, columns[("cal__hardware", cell)])
        else:
            columns[("cal", key)] = values


# ---- summaries ----------------------------------------------------------------------

def summary(tables, ratios) -> dict:
    """{table: (rows, median ratio, share within [0.8, 1.25], share within [0.5, 2])}."""
    by_table: dict = {}
    for table, r in zip(tables, ratios):
        by_table.setdefault(table, []).append(float(r))
    return {t: (len(r), statistics.median(r), sum(0.8 <= x <= 1.25 for x in r) / len(r), sum(0.5 <= x <= 2 for x in r) / len(r))
            for t, r in by_table.items()}


def cross_validated(calibration: Calibration, rounds: int = 3):
    """The summary of each half's rows when the table is fitted on the other half."""
    fit_on, read_on = calibration.halves()
    table = calibration.fit(fit_on, rounds)
    return summary(calibration.tables_of(read_on), calibration.ratios(table, read_on))


def table_text(table) -> str:
    """The fitted table as calibration.kvspec's rows."""
    lines = []
    for cell in TABLE_CELLS:
        values = [table.get((cell, g)) for g in GENERATIONS]
        hopper = table.get((cell, "hopper"))
        lines.append(f"    {cell} = by_generation(generation, " + ", ".join(f"{v:.2f}" for v in values) + f", {hopper:.2f})")
    lines += [f"    {cell} = {table[cell]:g}" for cell in GLOBAL_CELLS]
    return "\n".join(lines)


def print_summary(title, results):
    print(title)
    for table, (n, median, near, within) in results.items():
        print(f"  {table:15} {n:4} rows  median predicted/measured {median:.2f}  within [0.8, 1.25]: {near:.0%}  within [0.5, 2]: {within:.0%}")


def main(argv):
    settings = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    calibration = Calibration(settings)
    ratios = calibration.ratios()
    predicted = calibration.predict()
    batches = calibration.columns[("cal", "batch")]
    if "--rows" in argv:
        for i, (table, name, row, _) in enumerate(calibration.rows):
            print(f"{table:15} {row['model_key']:15} {row['gpu'][:14]:14} tp{row['tp'] or row['gpus']} {row['isl']:>5}/{str(row['osl']):>5} "
                  f"{row['metric']:17} batch {int(batches[i]):>5}  predicted {predicted[i]:10,.1f}  measured {row['value']:10,.1f}  "
                  f"ratio {ratios[i]:5.2f}")
        print()
    reasons: dict = {}
    for name, row, reason in calibration.skipped:
        reasons.setdefault(reason, []).append(name)
    for reason, names in sorted(reasons.items()):
        print(f"skipped {len(names):4} rows: {reason}")
    print_summary("the prelude's calibration table, every row:", summary(calibration.tables_of(range(len(ratios))), ratios))
    print_summary("fitted on half the rows, read on the other half:", cross_validated(calibration))
    if "--fit" in argv:
        print("the table fitted on every row:")
        print(table_text(calibration.fit()))


if __name__ == "__main__":
    main(sys.argv[1:])
