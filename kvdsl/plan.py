"""`kvdsl plan`: the cheapest deployments that serve a workload within its targets.

For one model and workload it tries every hardware, GPU count per copy (only
the counts the engine runs), and KV cache format: for each, the largest batch
that fits and keeps each token within the workload's time per token, and then
as many copies as the users need.  The options are ranked by cost per month;
the cheapest choices that cannot serve the workload are reported with why.

Speed: the program is evaluated once, with one deployment per hardware and
KV format; every other point re-evaluates only the cells that depend on
`gpus`, `batch` and `replicas` (as kvdsl/search.py does for one unknown).
"""

from __future__ import annotations

import math
from collections import ChainMap
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from .errors import KvdslError, UsageError, did_you_mean
from .evaluate import _Unknown, evaluate_expr

KV_DTYPES = ("fp16", "fp8")
VARIED = ("gpus", "batch", "replicas")
OUTPUTS = ("fits", "meets_targets", "max_batch", "tpot_seconds", "ttft_seconds", "output_tokens_per_second",
           "roofline_tpot_seconds", "roofline_ttft_seconds",
           "output_tokens_per_second_per_gpu",
           "cost_per_month", "cost_per_million_output_tokens", "users_served", "weights_bytes_per_gpu",
           "usable_bytes_per_gpu", "engine_runs_tensor_parallel")
MAX_BATCH = 4096  # engines schedule at most a few thousand sequences at once


@dataclass
class Plan:
    workload: str
    model: str
    engine: str
    options: list = field(default_factory=list)
    rejected: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"workload": self.workload, "options": self.options, "rejected": self.rejected}


class Point:
    """One deployment block whose `gpus`, `batch` and `replicas` are re-evaluated cheaply.

    `also` names more of the block's cells to vary the same way (`prompt_tokens`).
    """

    def __init__(self, program, base: dict, block: str, also: tuple = ()):
        from .search import depends_on

        self.program, self.base, self.block = program, base, block
        self.also = tuple(also)
        varied = VARIED + self.also
        affected = set()
        for cell in varied:
            affected |= depends_on(program, (block, cell))
        wanted = _ancestors(program, [(block, c) for c in OUTPUTS] + self._requirements(), affected)
        self.order = [k for k in program.in_order(wanted) if not (k[0] == block and k[1] in varied)
                      and program.cells[k].form in ("rule", "input", "require")]

    def _requirements(self):
        info = self.program.blocks[self.block]
        return [(self.block, name) for name in info.requirements]

    def at(self, gpus: int, batch: int, replicas: int, **also) -> dict:
        """The block's cells (those re-evaluated, and the rest as they were) at these counts and `also` values."""
        changed = {(self.block, cell): Fraction(value) for cell, value in zip(VARIED, (gpus, batch, replicas))}
        changed.update(((self.block, cell), Fraction(also[cell])) for cell in self.also)
        values = ChainMap(changed, self.base)
        for key in self.order:
            try:
                changed[key] = evaluate_expr(self.program.cells[key].expr, values)
            except (_Unknown, ArithmeticError, ValueError, KvdslError):
                changed[key] = None
        return _BlockView(self.block, values)

    def broken(self, values: dict) -> Optional[str]:
        for key in self._requirements():
            if values.get(key[1]) is False:
                return key[1]
        return None


class _BlockView:
    """One block's values by cell name."""

    def __init__(self, block: str, values):
        self.block, self.values = block, values

    def get(self, cell: str, default=None):
        return self.values.get((self.block, cell), default)

    def __getitem__(self, cell: str):
        return self.values[(self.block, cell)]


def _ancestors(program, keys, within: set) -> set:
    out, todo = set(), list(keys)
    while todo:
        key = todo.pop()
        if key in out or key not in within:
            continue
        out.add(key)
        todo.extend(program.dependencies(key))
    return out


def plan(paths: list, workload: Optional[str], model: Optional[str], hardware: Optional[list], engine: Optional[str],
         max_gpus: int) -> Plan:
    from .evaluate import evaluate

    blocks = _blocks(paths)
    kinds = lambda kind: [name for name, k, _ in blocks if k == kind]  # noqa: E731
    user = lambda kind: [name for name, k, prelude in blocks if k == kind and not prelude]  # noqa: E731
    workload = _pick(workload or "chat_workload", kinds("workload"), "workload")
    models = user("model")
    if model is None:
        if len(models) != 1:
            raise UsageError("name the model to plan: --model M", hint="models: " + ", ".join(models) if models else None)
        model = models[0]
    model = _pick(model, kinds("model"), "model")
    devices = [_pick(h.strip(), kinds("hardware"), "hardware") for h in hardware] if hardware else user("hardware")
    if not devices:
        raise UsageError("no hardware to plan on: import hardware specs or name them with --hardware")
    engine = _pick(engine or "vllm", kinds("engine"), "engine")
    if max_gpus < 1:
        raise UsageError("--max-gpus must be at least 1")

    text = [f'deployment plan__{h}__{kv} "{model} on {h}, {kv} cache" {{\n    model = {model}\n    hardware = {h}\n'
            f"    workload = {workload}\n    engine = {engine}\n    kv_dtype = {kv}\n}}" for h in devices for kv in KV_DTYPES]
    program = _with_blocks(paths, text)
    base = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items()
                                                 if rc.form == "require" and k[0].startswith("plan__")))
    users = int(base[(workload, "users")])
    result = Plan(workload, model, engine)
    for h in devices:
        for kv in KV_DTYPES:
            point = Point(program, base, f"plan__{h}__{kv}")
            for gpus in range(1, max_gpus + 1):
                option, reason = _best(point, gpus, users)
                if option is not None:
                    head = {"model": model, "hardware": h, "gpus": gpus, "replicas": option.pop("replicas"), "kv_dtype": kv}
                    result.options.append({**head, **option})
                elif kv == KV_DTYPES[-1] or reason.startswith("the engine"):
                    price = float(base[(h, "price_per_hour")]) * gpus
                    result.rejected.append({"hardware": h, "gpus": gpus, "reason": reason, "_price": price})
    served = {(o["hardware"], o["gpus"]) for o in result.options}
    result.rejected = [r for r in result.rejected if (r["hardware"], r["gpus"]) not in served]
    result.rejected = list({(r["hardware"], r["gpus"]): r for r in result.rejected}.values())
    result.rejected.sort(key=lambda r: (r["_price"], r["hardware"], r["gpus"]))
    for r in result.rejected:
        del r["_price"]
    result.options.sort(key=lambda o: (o["cost_per_month"], o["hardware"], o["gpus"], o["kv_dtype"]))
    return result


def _blocks(paths: list) -> list:
    """(name, kind, from the prelude) of every block the specs load, without resolving them."""
    from .api import raise_workspace
    from .loader import load

    workspace = load(paths)
    if workspace.errors:
        raise_workspace(workspace)
    return [(block.name, block.kind, prelude) for block, prelude in workspace.blocks]


def _with_blocks(paths: list, blocks: list):
    """The program of `paths` and the planner's own deployment blocks."""
    import tempfile
    from pathlib import Path

    from .api import build_program

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "plan.kvspec"
        imports = [f'import "{Path(p).resolve()}"' for p in paths]
        spec.write_text("\n".join(imports + blocks) + "\n")
        return build_program([str(spec)])


def _pick(name: str, names: list, kind: str) -> str:
    if name not in names:
        raise UsageError(f"no {kind} `{name}`", hint=did_you_mean(name, names) or f"{kind}s: " + ", ".join(names))
    return name


def _best(point: Point, gpus: int, users: int):
    """The option for one copy of `gpus` GPUs, or (None, why not)."""
    one = point.at(gpus, 1, 1)
    broken = point.broken(one)
    if broken == "require engine_runs_tensor_parallel" or one.get("engine_runs_tensor_parallel") is False:
        return None, f"the engine does not split the model over {gpus} GPUs"
    if not one.get("fits"):
        need, have = one.get("weights_bytes_per_gpu"), one.get("usable_bytes_per_gpu")
        if need is not None and have is not None and need > have:
            return None, f"weights need {float(need) / 2**30:,.1f} GiB per GPU, {float(have) / 2**30:,.1f} GiB usable"
        return None, "one sequence of the workload's context does not fit"
    if broken:
        return None, f"breaks `{broken}`"
    latency = _latency_failure(point, one)
    if latency:
        return None, latency + " at batch 1"
    top = min(int(one["max_batch"] or 1), MAX_BATCH, users)
    good, bad = 1, top + 1
    while bad - good > 1:  # the time per token grows with the batch
        mid = (good + bad) // 2
        if _latency_failure(point, point.at(gpus, mid, 1)) or not point.at(gpus, mid, 1).get("fits"):
            bad = mid
        else:
            good = mid
    replicas = math.ceil(users / good)
    final = point.at(gpus, good, replicas)
    if not final.get("meets_targets"):
        return None, _latency_failure(point, final) or "does not meet the targets"
    return {
        "replicas": replicas,
        "batch": good,
        "ttft_seconds": float(final["ttft_seconds"]),
        "tpot_seconds": float(final["tpot_seconds"]),
        "output_tokens_per_second_per_gpu": float(final["output_tokens_per_second_per_gpu"]),
        "cost_per_month": float(final["cost_per_month"]),
        "cost_per_million_output_tokens": float(final["cost_per_million_output_tokens"]),
    }, None


def _latency_failure(point: Point, values: dict) -> Optional[str]:
    workload = point.base[(point.block, "workload")]
    for name, cell in (("TTFT", "ttft_seconds"), ("TPOT", "tpot_seconds")):
        target = point.base.get((workload, f"{name.lower()}_target"))
        got = values.get(cell)
        if target and got is not None and got > target:
            return f"{name} {float(got) * 1000:,.0f} ms > {float(target) * 1000:,.0f} ms"
    return None


def render(result: Plan, top: int = 15, why: int = 8) -> str:
    lines = [f"plan: {result.model} for workload `{result.workload}` ({result.engine} accounting), ranked by USD per month"]
    if not result.options:
        lines.append("  no option serves the workload within its targets")
    else:
        header = f"  {'hardware':14} {'GPUs x copies':>13} {'KV':>5} {'batch':>6} {'TTFT':>9} {'TPOT':>8} {'tok/s/GPU':>10} {'USD/month':>12} {'USD/1M tok':>11}"
        lines.append(header)
        for o in result.options[:top]:
            lines.append(f"  {o['hardware']:14} {str(o['gpus']) + ' x ' + str(o['replicas']):>13} {o['kv_dtype']:>5} {o['batch']:>6,} "
                         f"{o['ttft_seconds'] * 1000:>7,.0f}ms {o['tpot_seconds'] * 1000:>6,.1f}ms {o['output_tokens_per_second_per_gpu']:>10,.0f} "
                         f"{o['cost_per_month']:>12,.0f} {o['cost_per_million_output_tokens']:>11,.2f}")
        if len(result.options) > top:
            lines.append(f"  ... {len(result.options) - top} more (--json lists every option)")
    if result.rejected:
        lines.append("cheapest rejected:")
        for r in result.rejected[:why]:
            lines.append(f"  {r['hardware']} x {r['gpus']}: {r['reason']}")
    return "\n".join(lines)
