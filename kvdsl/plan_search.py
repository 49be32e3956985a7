"""The search of `kvdsl plan`: every candidate of a model evaluated at once, over NumPy arrays.

`Planner` sets each candidate's blocks in the stand-ins' place, finds the
largest batch each holds within the workload's latency targets by one
bisection over all of them, ranks those that serve the workload by cost
(each checked on the exact rules) and finds the verdict of the cheapest that
do not.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Optional

from .errors import KvdslError
from .evaluate import _Unknown, evaluate_expr
from .plan_candidates import ENGINES, STAND_INS, Candidate


MAX_BATCH = 4096  # engines schedule at most a few thousand sequences at once
LAYOUT = ("gpus", "pipeline_stages", "batch", "replicas", "attention_data_parallel", "expert_parallel", "prefill_gpus")
# the figures a candidate is judged and ranked by
VECTOR_OUTPUTS = ("fits", "max_batch", "meets_ttft", "meets_tpot", "keeps_up", "meets_targets", "cost_per_month",
                  "engine_runs_tensor_parallel", "weights_bytes_per_gpu")
COPIES_TRIED = 2 ** 16  # the most copies a rate is spread over while the batch is searched

OPTION_OUTPUTS = ("ttft_seconds", "tpot_seconds", "output_tokens_per_second_per_gpu", "cost_per_month",
                  "cost_per_million_output_tokens", "verdict", "launch_command", "launch_note", "meets_targets",
                  "engine_max_concurrency")


class Planner:
    """The candidates of one template deployment, evaluated together."""

    def __init__(self, program, base: dict, block: str, users: int, rate: float = 0):
        from .search import ancestors, depends_on

        self.program, self.base, self.block, self.users, self.rate = program, base, block, users, rate
        # a workload given as a rate: the copies are searched for, from a number that spreads any rate thin
        self.most_copies = COPIES_TRIED if rate > 0 else users
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
        # the cells the batch and the copies change: all a bisection step recomputes
        counted = depends_on(program, (block, "batch")) | depends_on(program, (block, "replicas"))
        self.count_order = [k for k in self.vector_order if k in counted]

    # ---- the values a candidate sets ----------------------------------------------

    def _settings(self, c: Candidate, batch, replicas) -> dict:
        """(block, cell) -> value: the candidate's blocks in the stand-ins' place, and its counts."""
        values = {(self.block, "gpus"): Fraction(c.gpus), (self.block, "pipeline_stages"): Fraction(c.pipeline_stages),
                  (self.block, "batch"): Fraction(batch), (self.block, "replicas"): Fraction(replicas),
                  (self.block, "attention_data_parallel"): Fraction(c.attention_data_parallel),
                  (self.block, "expert_parallel"): Fraction(c.expert_parallel), (self.block, "prefill_gpus"): Fraction(c.prefill_gpus),
                  (self.block, "engine"): c.engine}
        for cell, stand_in in self.stand_ins.items():
            real = getattr(c, cell)
            values[(self.block, cell)] = real
            for name in self.program.blocks[stand_in].cells:
                if (real, name) in self.base:
                    values[(stand_in, name)] = self.base[(real, name)]
        return values

    def columns(self, candidates: list) -> dict:
        """(block, cell) -> a NumPy array over the candidates of what each sets (the batch and copies apart).

        A stand-in's cells are looked up once per real block, then spread over the candidates.
        """
        import numpy as np

        block = self.block
        columns = {(block, "gpus"): [c.gpus for c in candidates],
                   (block, "pipeline_stages"): [c.pipeline_stages for c in candidates],
                   (block, "batch"): [1] * len(candidates), (block, "replicas"): [1] * len(candidates),
                   (block, "attention_data_parallel"): [c.attention_data_parallel for c in candidates],
                   (block, "expert_parallel"): [c.expert_parallel for c in candidates],
                   (block, "prefill_gpus"): [c.prefill_gpus for c in candidates],
                   (block, "engine"): [c.engine for c in candidates]}
        out = {key: _column(column) for key, column in columns.items()}
        for cell, stand_in in self.stand_ins.items():
            reals = [getattr(c, cell) for c in candidates]
            names = list(dict.fromkeys(reals))  # in order of first use: the first candidate's first
            where = {name: i for i, name in enumerate(names)}
            index = np.fromiter((where[r] for r in reals), dtype=np.intp, count=len(reals))
            out[(block, cell)] = _column(names)[index]
            for name in self.program.blocks[stand_in].cells:
                if (names[0], name) in self.base:
                    out[(stand_in, name)] = _column([self.base.get((real, name)) for real in names])[index]
        return out

    def _vector(self, columns: dict, batch, replicas, known: Optional[dict] = None) -> dict:
        """Every candidate's values at once: NumPy arrays over the candidates.

        `known` holds the values that do not depend on the batch or the copies (of these candidates):
        only the others are computed again.
        """
        import numpy as np

        from .vector import vector_value

        values = dict(self.base)
        values.update(columns)
        values[(self.block, "batch")] = np.asarray(batch, dtype=float)
        values[(self.block, "replicas")] = np.asarray(replicas, dtype=float)
        if known is not None:
            values.update(known)
        with np.errstate(all="ignore"):
            for key in self.count_order if known is not None else self.vector_order:
                values[key] = vector_value(self.program.cells[key].expr, values)
        return values

    def _known(self, first: dict, live, size: int) -> dict:
        """The values of `first` the batch and the copies do not change, for the candidates `live` of `size`."""
        counted = set(self.count_order)
        out = {}
        for key in self.vector_order:
            if key not in counted:
                value = first[key]
                out[key] = value[live] if getattr(value, "shape", None) == (size,) else value
        return out

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

    def exact(self, c: Candidate, batch: int, replicas: int, cells: tuple = OPTION_OUTPUTS + VECTOR_OUTPUTS) -> dict:
        """One candidate's `cells`, exactly: (cell) -> value, computed only as they need."""
        lazy = _Lazy(self.program, self.base, self._settings(c, batch, replicas), set(self.order))
        return {cell: lazy.get((self.block, cell)) for cell in cells}

    # ---- the search -----------------------------------------------------------------

    def run(self, candidates: list, checked: Optional[int] = None):
        """(options, rejected) for every candidate; `checked` options are evaluated exactly (all when None)."""
        import numpy as np

        if not candidates:
            return [], []
        everything = self.columns(candidates)
        ones = np.ones(len(candidates))
        spread = np.full(len(candidates), COPIES_TRIED) if self.rate > 0 else ones
        first = self._vector(everything, ones, spread)
        start = self._holds(first, ("fits", "keeps_up", "meets_ttft", "meets_tpot"), candidates)
        # the batch: the largest each engine holds within the latency targets, by one bisection over
        # every candidate that starts (the time per token grows with the batch)
        live = np.flatnonzero(start)
        subset = [candidates[i] for i in live]
        columns = {key: column[live] for key, column in everything.items()}
        limit = MAX_BATCH if self.rate > 0 else min(MAX_BATCH, self.users)
        top = np.minimum(np.nan_to_num(np.asarray(first[(self.block, "max_batch")], dtype=float)[live], nan=1), limit)
        good, bad = np.ones(len(live), dtype=int), np.maximum(top, 1).astype(int) + 1
        known = self._known(first, live, len(candidates))
        while np.any(bad - good > 1):
            mid = np.where(bad - good > 1, (good + bad) // 2, good)
            ok = self._holds(self._vector(columns, mid, spread[live], known), ("fits", "keeps_up", "meets_ttft", "meets_tpot"), subset)
            good, bad = np.where(ok, mid, good), np.where(ok | (mid == good), bad, mid)
        replicas = self._fewest_copies(columns, good, known, subset) if self.rate > 0 else -(-self.users // good)
        final = self._vector(columns, good, replicas, known)
        met = self._holds(final, ("meets_targets",), subset)
        costs = np.asarray(final[(self.block, "cost_per_month")], dtype=float)
        options = self._options(subset, good, replicas, met, costs, checked)
        served = np.zeros(len(candidates), dtype=bool)
        served[live[met]] = True
        return options, self._rejected(candidates, served, first)

    def _fewest_copies(self, columns: dict, batch, known: dict, candidates: list):
        """The fewest copies of each candidate that keep up with the workload's rate within its targets (bisection:
        more copies, each sees less of the rate)."""
        import numpy as np

        good, bad = np.full(len(batch), COPIES_TRIED), np.zeros(len(batch), dtype=int)
        while np.any(good - bad > 1):
            mid = np.where(good - bad > 1, (good + bad) // 2, good)
            ok = self._holds(self._vector(columns, batch, mid, known), ("meets_targets",), candidates)
            good, bad = np.where(ok, mid, good), np.where(ok | (mid == good), bad, mid)
        return good

    def _options(self, candidates, batch, replicas, met, costs, checked: Optional[int]) -> list:
        """The candidates that meet the workload, cheapest first, each checked exactly; the best precisions per layout."""
        import numpy as np

        best: dict = {}
        for i in np.flatnonzero(met):
            c = candidates[i]
            layout = (c.hardware, c.engine, c.gpus, c.pipeline_stages, c.attention_data_parallel, c.expert_parallel, c.prefill_gpus)
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
            verdict = self.exact(c, 1, self.most_copies, ("verdict",))["verdict"]  # copies enough: what fails is not their number
            out.append({"hardware": c.hardware, "gpus": c.gpus, "reason": verdict if isinstance(verdict, str) else "no value"})
        return out


def _column(values: list):
    """A NumPy array of one cell's values: conditions as bool, text as objects, numbers (or NaN) as floats."""
    import numpy as np

    first = values[0]
    if isinstance(first, bool):
        return np.asarray(values, dtype=bool)
    if isinstance(first, str):
        return np.asarray(values, dtype=object)
    return np.asarray([float(v) if isinstance(v, (int, Fraction)) else np.nan for v in values])


def _option(c: Candidate, batch: int, replicas: int, exact: dict) -> dict:
    number = lambda cell: float(exact[cell])  # noqa: E731
    return {"hardware": c.hardware, "engine": c.engine, "gpus": c.gpus, "pipeline_stages": c.pipeline_stages,
            "attention_data_parallel": c.attention_data_parallel, "expert_parallel": c.expert_parallel, "prefill_gpus": c.prefill_gpus,
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
