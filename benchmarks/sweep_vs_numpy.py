"""Time a 1,000,000-point `kvdsl sweep` against the same formula written by hand in NumPy.

    python benchmarks/sweep_vs_numpy.py

Both compute `max_batch` of the deployment gpt_oss_120b_h100 (a sliding-window
model, block rounding on) for every context from 1 to 1,000,000 tokens, in one
process, and must agree exactly.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from kvdsl.api import evaluate_paths
from kvdsl.sweep import CompiledSweep, parse_range

CATALOG = Path(__file__).resolve().parents[1] / "specs" / "catalog.kvspec"
BLOCK = "gpt_oss_120b_h100"


def hand_written(context, v):
    """max_batch from the prelude's rules, by hand."""
    block = float(v["block_size"])
    paged = np.ceil(context / block) * block
    sliding = np.ceil(np.minimum(context, float(v["window"])) / block) * block
    per_sequence = float(v["full"]) * paged + float(v["sliding"]) * sliding + float(v["state"])
    batch = np.maximum(np.floor(float(v["budget"]) / per_sequence), 0)
    return np.where(context <= float(v["limit"]), batch, 0)


def best(fn, runs: int = 5):
    """(result, fastest time) of `runs` calls."""
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return result, min(times)


def main() -> None:
    program, values = evaluate_paths([str(CATALOG)])
    get = lambda cell: values[(BLOCK, cell)]  # noqa: E731
    model = get("model")
    constants = {
        "block_size": get("block_size"), "window": values[(model, "window")], "full": get("full_bytes_per_token"),
        "sliding": get("sliding_bytes_per_token"), "state": get("state_bytes_per_sequence_per_gpu"),
        "budget": get("kv_budget_bytes_per_gpu"), "limit": values[(model, "context_limit")],
    }
    axis = parse_range("context=1:1000000")

    started = time.perf_counter()
    sweep = CompiledSweep(program, BLOCK, [axis], values)
    compile_time = time.perf_counter() - started
    max_batch = sweep.functions[sweep.results.index("max_batch")]
    (inputs, results), sweep_time = best(sweep.run)
    expected, hand_time = best(lambda: hand_written(axis.values, constants))
    one, alone_time = best(lambda: max_batch(axis.values))
    assert np.array_equal(one, expected)

    got = results[sweep.results.index("max_batch")]
    assert np.array_equal(got, expected), "kvdsl sweep and the hand-written NumPy disagree"
    print(f"points:                 {axis.values.size:,}")
    print(f"kvdsl compile (once):   {compile_time:.3f} s")
    print(f"kvdsl evaluate:         {sweep_time:.3f} s  ({len(sweep.results)} result cells; best of 5)")
    print(f"kvdsl max_batch alone:  {alone_time:.3f} s  (best of 5)")
    print(f"hand-written NumPy:     {hand_time:.3f} s  (max_batch only; best of 5)")
    print("max_batch agrees at every point")


if __name__ == "__main__":
    main()
