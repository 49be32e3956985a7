"""`kvdsl plan`: the cheapest deployments that serve a workload within its targets.

For each model it tries what people choose: every hardware, GPUs per copy
and pipeline stages, the weights' precision (as shipped, FP8, and NVFP4 where
the GPU computes in FP4), the KV cache's (the model's and FP8), and the
serving engine (vLLM, SGLang and TensorRT-LLM unless `--engine` names one).
Each candidate is sized by its engine's accounting (the prelude's `fits`,
`max_batch`, `meets_ttft`, `meets_tpot`): the largest batch per copy the
engine holds within the workload's latency targets, then as many copies as
the users need.  Options are ranked by cost per month, each with its verdict
and the command that launches it; the cheapest layouts that cannot serve the
workload are reported with their verdict.

How: one template deployment per model reads its GPU and number formats
through stand-in blocks (`plan__hardware`, `plan__kv`, `plan__weights`,
`plan__experts`).  A candidate puts a real block's values in place of a
stand-in's, so one program serves every candidate: all of them are
evaluated at once as NumPy arrays (`vector_value`), the batch found by one
bisection over all of them together.  Each option reported is then
evaluated exactly, which gives its verdict and launch command.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from .errors import KvdslError, UsageError, did_you_mean
from .evaluate import _Unknown, evaluate_expr

ENGINES = ("vllm", "sglang", "trtllm")  # tried when --engine names none
STAGES = (1, 2, 4)  # pipeline stages tried, where they divide the GPUs
MAX_BATCH = 4096  # engines schedule at most a few thousand sequences at once
STAND_INS = {"hardware": "plan__hardware", "kv_dtype": "plan__kv", "weight_dtype": "plan__weights",
             "expert_weight_dtype": "plan__experts"}
LAYOUT = ("gpus", "pipeline_stages", "batch", "replicas")
# the figures a candidate is judged and ranked by
VECTOR_OUTPUTS = ("fits", "max_batch", "meets_ttft", "meets_tpot", "meets_targets", "cost_per_month",
                  "engine_runs_tensor_parallel", "weights_bytes_per_gpu")
OPTION_OUTPUTS = ("ttft_seconds", "tpot_seconds", "output_tokens_per_second_per_gpu", "cost_per_month",
                  "cost_per_million_output_tokens", "verdict", "launch_command", "launch_note", "meets_targets",
                  "engine_max_concurrency")
# the cells of one block `Point` evaluates (benchmarks/calibrate.py)
OUTPUTS = ("fits", "meets_targets", "max_batch", "tpot_seconds", "ttft_seconds", "output_tokens_per_second",
           "roofline_tpot_seconds", "roofline_ttft_seconds",
           "output_tokens_per_second_per_gpu",
           "cost_per_month", "cost_per_million_output_tokens", "users_served", "weights_bytes_per_gpu",
           "usable_bytes_per_gpu", "engine_runs_tensor_parallel")
VARIED = ("gpus", "batch", "replicas")


@dataclass
class Plan:
    """The options that serve the workload, cheapest first, and the cheapest layouts that do not."""

    workload: str
    models: list
    engines: list
    options: list = field(default_factory=list)
    rejected: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"workload": self.workload, "models": self.models, "engines": self.engines,
                "options": self.options, "rejected": self.rejected}


@dataclass(frozen=True)
class Candidate:
    """One layout to try: the blocks that stand in, and the counts."""

    hardware: str
    engine: str
    kv_dtype: str
    weight_dtype: str
    expert_weight_dtype: str
    gpus: int
    pipeline_stages: int


def plan(paths: list, workload: Optional[str], models: Optional[list], hardware: Optional[list], engine: Optional[str],
         max_gpus: int, checked: Optional[int] = None, progress=None) -> Plan:
    """Plan every model of `models` (or the specs' only model) for the workload.

    The `checked` cheapest options of each model are evaluated exactly and listed (every one when None).
    """
    from .evaluate import evaluate

    blocks = _blocks(paths)
    kinds = lambda kind: [name for name, k, _ in blocks if k == kind]  # noqa: E731
    user = lambda kind: [name for name, k, prelude in blocks if k == kind and not prelude]  # noqa: E731
    workload = _pick(workload or "chat_workload", kinds("workload"), "workload")
    if not models:
        if len(user("model")) != 1:
            raise UsageError("name the model to plan: --model M (or several: --model A,B)",
                             hint="models: " + ", ".join(user("model")) if user("model") else None)
        models = user("model")
    models = list(dict.fromkeys(_pick(m, kinds("model"), "model") for m in models))
    devices = [_pick(h.strip(), kinds("hardware"), "hardware") for h in hardware] if hardware else user("hardware")
    if not devices:
        raise UsageError("no hardware to plan on: import hardware specs or name them with --hardware")
    engines = [_pick(engine, kinds("engine"), "engine")] if engine else [e for e in ENGINES if e in kinds("engine")]
    if max_gpus < 1:
        raise UsageError("--max-gpus must be at least 1")
    program = _with_blocks(paths, _template(models, workload, devices[0], engines[0]))
    base = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items()
                                                 if rc.form == "require" and k[0].startswith("plan__")))
    users = int(base[(workload, "users")])
    result = Plan(workload, models, engines)
    for model in models:
        if progress is not None:
            progress(model)
        planner = _Planner(program, base, f"plan__{model}", users)
        candidates = _candidates(program, base, model, devices, engines, max_gpus)
        options, rejected = planner.run(candidates, checked)
        result.options += [{"model": model, **o} for o in options]
        result.rejected += [{"model": model, **r} for r in rejected]
    return result


def _template(models: list, workload: str, device: str, engine: str) -> list:
    """The stand-in blocks and one deployment per model that reads them."""
    text = [f'hardware {STAND_INS["hardware"]} "The GPU a plan tries" extends {device} {{\n}}',
            f'format {STAND_INS["kv_dtype"]} "The KV cache precision a plan tries" extends fp16 {{\n}}',
            f'format {STAND_INS["weight_dtype"]} "The weights\' precision a plan tries" extends fp16 {{\n}}',
            f'format {STAND_INS["expert_weight_dtype"]} "The experts\' precision a plan tries" extends fp16 {{\n}}']
    for model in models:
        cells = "".join(f"    {cell} = {block}\n" for cell, block in STAND_INS.items())
        text.append(f'deployment plan__{model} "{model}, planned" {{\n    model = {model}\n    workload = {workload}\n'
                    f"    engine = {engine}\n{cells}}}")
    return text


def _candidates(program, base: dict, model: str, devices: list, engines: list, max_gpus: int) -> list:
    """Every layout to try for one model."""
    out = []
    for device in devices:
        fp4 = base[(device, "flops_fp4")] > 0
        for weights, experts in _weight_choices(base, model, fp4):
            for kv in _kv_choices(base, model):
                for engine in engines:
                    for gpus in range(1, max_gpus + 1):
                        for stages in STAGES:
                            if stages <= gpus and gpus % stages == 0:
                                out.append(Candidate(device, engine, kv, weights, experts, gpus, stages))
    return out


def _bits(base: dict, fmt: str) -> Fraction:
    return base[(fmt, "bits_per_element")]


def _weight_choices(base: dict, model: str, fp4: bool) -> list:
    """(weights, experts) formats: as shipped, and FP8 and NVFP4 where they are smaller (NVFP4 where the GPU has FP4 units)."""
    shipped, experts = base[(model, "weight_dtype")], base[(model, "expert_weight_dtype")]
    out = [(shipped, experts)]
    for fmt, usable in (("fp8", True), ("nvfp4", fp4)):
        if usable and _bits(base, fmt) < _bits(base, shipped):
            out.append((fmt, fmt if _bits(base, fmt) < _bits(base, experts) else experts))
    return out


def _kv_choices(base: dict, model: str) -> list:
    own = base[(model, "kv_dtype")]
    return [own] + (["fp8"] if _bits(base, "fp8") < _bits(base, own) else [])


class _Planner:
    """The candidates of one template deployment, evaluated together."""

    def __init__(self, program, base: dict, block: str, users: int):
        from .search import ancestors, depends_on

        self.program, self.base, self.block, self.users = program, base, block, users
        self.stand_ins = {cell: program.cells[(block, cell)].ref_target for cell in STAND_INS}
        varied = {(block, cell) for cell in LAYOUT + tuple(STAND_INS) + ("engine",)}
        for stand_in in self.stand_ins.values():
            varied |= {(stand_in, cell) for cell in program.blocks[stand_in].cells}
        affected = set().union(*(depends_on(program, key) for key in varied))
        self.requirements = [(block, name) for name in program.blocks[block].requirements if (block, name) in affected]
        outputs = [(block, c) for c in VECTOR_OUTPUTS + OPTION_OUTPUTS]
        wanted = ancestors(program, outputs + self.requirements, affected)
        self.varied = varied
        self.order = [k for k in program.in_order(wanted) if k not in varied and k[0] not in self.stand_ins.values()
                      and program.cells[k].form in ("rule", "input", "require")]
        self.vector_order = [k for k in program.in_order(ancestors(program, [(block, c) for c in VECTOR_OUTPUTS]
                                                                  + self.requirements, affected))
                             if k not in varied and k[0] not in self.stand_ins.values()
                             and program.cells[k].form in ("rule", "input", "require")]

    # ---- the values a candidate sets ----------------------------------------------

    def _settings(self, c: Candidate, batch, replicas) -> dict:
        """(block, cell) -> value: the candidate's blocks in the stand-ins' place, and its counts."""
        values = {(self.block, "gpus"): Fraction(c.gpus), (self.block, "pipeline_stages"): Fraction(c.pipeline_stages),
                  (self.block, "batch"): Fraction(batch), (self.block, "replicas"): Fraction(replicas),
                  (self.block, "engine"): c.engine}
        for cell, stand_in in self.stand_ins.items():
            real = getattr(c, cell)
            values[(self.block, cell)] = real
            for name in self.program.blocks[stand_in].cells:
                if (real, name) in self.base:
                    values[(stand_in, name)] = self.base[(real, name)]
        return values

    def columns(self, candidates: list) -> dict:
        """(block, cell) -> a NumPy array over the candidates of what each sets (the batch and copies apart)."""
        import numpy as np

        columns: dict = {}
        for c in candidates:
            for key, value in self._settings(c, 1, 1).items():
                columns.setdefault(key, []).append(value)
        out = {}
        for key, column in columns.items():
            first = column[0]
            if isinstance(first, bool):
                out[key] = np.asarray(column, dtype=bool)
            elif isinstance(first, str):
                out[key] = np.asarray(column, dtype=object)
            else:
                out[key] = np.asarray([float(v) if isinstance(v, (int, Fraction)) else np.nan for v in column])
        return out

    def _vector(self, columns: dict, batch, replicas) -> dict:
        """Every candidate's values at once: NumPy arrays over the candidates."""
        import numpy as np

        from .vector import vector_value

        values = dict(self.base)
        values.update(columns)
        values[(self.block, "batch")] = np.asarray(batch, dtype=float)
        values[(self.block, "replicas")] = np.asarray(replicas, dtype=float)
        with np.errstate(all="ignore"):
            for key in self.vector_order:
                values[key] = vector_value(self.program.cells[key].expr, values)
        return values

    def _holds(self, values: dict, cells: tuple, candidates: list):
        import numpy as np

        from .search import truth

        size = len(candidates)
        held = np.ones(size, dtype=bool)
        for cell in cells:
            held &= truth(values.get((self.block, cell)), size)
        engines = np.asarray([c.engine for c in candidates], dtype=object)
        for key in self.requirements:
            scope = self.program.cells[key].scope
            ok = truth(values.get(key), size)
            held &= ok if scope is None else (ok | (engines != scope))
        return held

    def exact(self, c: Candidate, batch: int, replicas: int) -> dict:
        """One candidate's cells, exactly: (cell) -> value, computed only as the outputs need them."""
        lazy = _Lazy(self.program, self.base, self._settings(c, batch, replicas), set(self.order))
        return {cell: lazy.get((self.block, cell)) for cell in OPTION_OUTPUTS + VECTOR_OUTPUTS}

    # ---- the search -----------------------------------------------------------------

    def run(self, candidates: list, checked: Optional[int] = None):
        """(options, rejected) for every candidate; `checked` options are evaluated exactly (all when None)."""
        import numpy as np

        if not candidates:
            return [], []
        everything = self.columns(candidates)
        ones = np.ones(len(candidates))
        first = self._vector(everything, ones, ones)
        start = self._holds(first, ("fits", "meets_ttft", "meets_tpot"), candidates)
        # the batch: the largest each engine holds within the latency targets, by one bisection over
        # every candidate that starts (the time per token grows with the batch)
        live = np.flatnonzero(start)
        subset = [candidates[i] for i in live]
        columns = {key: column[live] for key, column in everything.items()}
        limit = min(MAX_BATCH, self.users)
        top = np.minimum(np.nan_to_num(np.asarray(first[(self.block, "max_batch")], dtype=float)[live], nan=1), limit)
        good, bad = np.ones(len(live), dtype=int), np.maximum(top, 1).astype(int) + 1
        while np.any(bad - good > 1):
            mid = np.where(bad - good > 1, (good + bad) // 2, good)
            ok = self._holds(self._vector(columns, mid, np.ones(len(live))), ("fits", "meets_ttft", "meets_tpot"), subset)
            good, bad = np.where(ok, mid, good), np.where(ok | (mid == good), bad, mid)
        replicas = -(-self.users // good)
        final = self._vector(columns, good, replicas)
        met = self._holds(final, ("meets_targets",), subset)
        costs = np.asarray(final[(self.block, "cost_per_month")], dtype=float)
        options = self._options(subset, good, replicas, met, costs, checked)
        served = np.zeros(len(candidates), dtype=bool)
        served[live[met]] = True
        return options, self._rejected(candidates, served, first)

    def _options(self, candidates, batch, replicas, met, costs, checked: Optional[int]) -> list:
        """The candidates that meet the workload, cheapest first, each checked exactly; the best precisions per layout."""
        import numpy as np

        best: dict = {}
        for i in np.flatnonzero(met):
            c = candidates[i]
            layout = (c.hardware, c.engine, c.gpus, c.pipeline_stages)
            if layout not in best or costs[i] < costs[best[layout]]:
                best[layout] = i
        engines = {e: n for n, e in enumerate(ENGINES)}
        ranked = sorted(best.values(), key=lambda i: (costs[i], candidates[i].hardware, candidates[i].gpus,
                                                      engines.get(candidates[i].engine, len(engines))))
        out = []
        for i in ranked:
            if checked is not None and len(out) >= checked:
                break
            c, b, r = candidates[i], int(batch[i]), int(replicas[i])
            exact = self.exact(c, b, r)
            if exact["meets_targets"] is not True:  # floats misjudged a boundary: the exact rules decide
                continue
            out.append(_option(c, b, r, exact))
        return out

    def _rejected(self, candidates, met, first, shown: int = 8) -> list:
        """For each GPU and count that serves nothing, the verdict of its most favourable candidate, cheapest first."""
        import numpy as np

        # a count no engine splits the model over is no choice at all: it is not listed
        runs = self._holds(first, ("engine_runs_tensor_parallel",), candidates)
        served = {(c.hardware, c.gpus) for c, m in zip(candidates, met) if m}
        served |= {(c.hardware, c.gpus) for c in candidates} - {(c.hardware, c.gpus) for c, r in zip(candidates, runs) if r}
        room = np.nan_to_num(np.asarray(first[(self.block, "max_batch")], dtype=float), nan=-1)
        weights = np.nan_to_num(np.asarray(first[(self.block, "weights_bytes_per_gpu")], dtype=float), nan=np.inf)
        favour = lambda i: (room[i], -weights[i])  # noqa: E731  the most sequences, else the lightest weights
        chosen: dict = {}
        for i, c in enumerate(candidates):
            key = (c.hardware, c.gpus)
            if key not in served and (key not in chosen or favour(i) > favour(chosen[key])):
                chosen[key] = i
        price = lambda key: float(self.base[(key[0], "price_per_hour")]) * key[1]  # noqa: E731
        out = []
        for key in sorted(chosen, key=lambda k: (price(k), k))[:shown]:
            c = candidates[chosen[key]]
            verdict = self.exact(c, 1, self.users)["verdict"]  # as many copies as users: what fails is not their number
            out.append({"hardware": c.hardware, "gpus": c.gpus, "reason": verdict if isinstance(verdict, str) else "no value"})
        return out


def _option(c: Candidate, batch: int, replicas: int, exact: dict) -> dict:
    number = lambda cell: float(exact[cell])  # noqa: E731
    return {"hardware": c.hardware, "engine": c.engine, "gpus": c.gpus, "pipeline_stages": c.pipeline_stages,
            "replicas": replicas, "weight_dtype": c.weight_dtype, "kv_dtype": c.kv_dtype, "batch": batch,
            "ttft_seconds": number("ttft_seconds"), "tpot_seconds": number("tpot_seconds"),
            "output_tokens_per_second_per_gpu": number("output_tokens_per_second_per_gpu"),
            "cost_per_month": number("cost_per_month"),
            "cost_per_million_output_tokens": number("cost_per_million_output_tokens"),
            "engine_max_concurrency": number("engine_max_concurrency"),
            "verdict": exact["verdict"], "launch": exact["launch_command"], "launch_note": exact["launch_note"]}


class _Lazy(dict):
    """Values that compute a cell of `pending` the first time it is read, the others from `base`."""

    def __init__(self, program, base: dict, settings: dict, pending: set):
        super().__init__(settings)
        self.program, self.base, self.pending = program, base, pending

    def __missing__(self, key):
        if key not in self.pending:
            return self.base[key]
        try:
            value = evaluate_expr(self.program.cells[key].expr, self)
        except (_Unknown, ArithmeticError, ValueError, KvdslError):
            value = None
        self[key] = value
        return value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


# ---- one block's cells at other counts (benchmarks/calibrate.py) --------------------

class Point:
    """One deployment block whose `gpus`, `batch` and `replicas` are re-evaluated cheaply.

    `also` names more of the block's cells to vary the same way (`prompt_tokens`).
    """

    def __init__(self, program, base: dict, block: str, also: tuple = ()):
        from .search import ancestors, depends_on

        self.program, self.base, self.block = program, base, block
        self.also = tuple(also)
        varied = VARIED + self.also
        affected = set()
        for cell in varied:
            affected |= depends_on(program, (block, cell))
        requirements = [(block, name) for name in program.blocks[block].requirements]
        wanted = ancestors(program, [(block, c) for c in OUTPUTS] + requirements, affected)
        self.order = [k for k in program.in_order(wanted) if not (k[0] == block and k[1] in varied)
                      and program.cells[k].form in ("rule", "input", "require")]

    def at(self, gpus: int, batch: int, replicas: int, **also) -> "_BlockView":
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


class _BlockView:
    """One block's values by cell name."""

    def __init__(self, block: str, values):
        self.block, self.values = block, values

    def get(self, cell: str, default=None):
        return self.values.get((self.block, cell), default)

    def __getitem__(self, cell: str):
        return self.values[(self.block, cell)]


# ---- the specs ------------------------------------------------------------------------

def _blocks(paths: list) -> list:
    """(name, kind, from the prelude) of every block the specs load, without resolving them."""
    from .build import raise_workspace
    from .loader import load

    workspace = load(paths)
    if workspace.errors:
        raise_workspace(workspace)
    return [(block.name, block.kind, prelude) for block, prelude in workspace.blocks]


def _with_blocks(paths: list, blocks: list):
    """The program of `paths` and the planner's own blocks, loaded from memory (nothing is written)."""
    from pathlib import Path

    from .api import build_program
    from .loader import overlaid

    spec = Path.cwd() / "<plan>.kvspec"  # a name no file has: the loader reads the text given for it
    imports = [f'import "{Path(p).resolve()}"' for p in paths]
    with overlaid({spec: "\n".join(imports + blocks) + "\n"}):
        return build_program([str(spec)])


def _pick(name: str, names: list, kind: str) -> str:
    if name not in names:
        raise UsageError(f"no {kind} `{name}`", hint=did_you_mean(name, names) or f"{kind}s: " + ", ".join(names))
    return name


# ---- text ------------------------------------------------------------------------------

def render(result: Plan, top: int = 15, why: int = 8) -> str:
    """The options per model as a table, the cheapest one's launch command, and the cheapest rejections."""
    lines = []
    for model in result.models:
        options = [o for o in result.options if o["model"] == model]
        rejected = [r for r in result.rejected if r["model"] == model]
        engines = ", ".join(result.engines)
        lines.append(f"plan: {model} for workload `{result.workload}` ({engines}), ranked by USD per month")
        if not options:
            lines.append("  no option serves the workload within its targets")
        else:
            rows = _rows(options)
            lines.append(f"  {'hardware':12} {'engines':18} {'GPUs x copies':>13} {'weights':>7} {'KV':>5} {'batch':>6} "
                         f"{'TTFT':>8} {'TPOT':>8} {'tok/s/GPU':>9} {'USD/month':>11} {'USD/1M tok':>10}")
            for o, engines in rows[:top]:
                layout = f"{o['gpus']}" + (f" ({o['gpus'] // o['pipeline_stages']}x{o['pipeline_stages']})" if o["pipeline_stages"] > 1 else "")
                lines.append(f"  {o['hardware']:12} {'/'.join(engines):18} {layout + ' x ' + str(o['replicas']):>13} "
                             f"{o['weight_dtype']:>7} {o['kv_dtype']:>5} {o['batch']:>6,} {o['ttft_seconds'] * 1000:>6,.0f}ms "
                             f"{o['tpot_seconds'] * 1000:>6,.1f}ms {o['output_tokens_per_second_per_gpu']:>9,.0f} "
                             f"{o['cost_per_month']:>11,.0f} {o['cost_per_million_output_tokens']:>10,.2f}")
            if len(rows) > top:
                lines.append("  ... more (--json lists every option)")
            lines.append(f"  the cheapest: {options[0]['verdict']}")
            lines.append(f"  launch each copy with: {options[0]['launch']}")
            if options[0]["launch_note"]:
                lines.append(f"    ({options[0]['launch_note']})")
        if rejected:
            lines.append("  cheapest rejected:")
            for r in rejected[:why]:
                lines.append(f"    {r['hardware']} x {r['gpus']}: {r['reason']}")
    return "\n".join(lines)


SAME = ("hardware", "gpus", "pipeline_stages", "replicas", "weight_dtype", "kv_dtype", "batch", "cost_per_month")


def _rows(options: list) -> list:
    """(option, engines): options that differ only in their engine shown once, with every engine that gives them."""
    rows: dict = {}
    for o in options:
        rows.setdefault(tuple(o[k] for k in SAME), (o, []))[1].append(o["engine"])
    return list(rows.values())
