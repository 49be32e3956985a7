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

The layouts tried are in plan_candidates.py, the search over them in
plan_search.py, the text `kvdsl plan` prints in plan_text.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .errors import KvdslError, UsageError, did_you_mean
from .plan_candidates import ENGINES, STAND_INS, candidates_for
from .plan_search import Planner


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
    program = _with_blocks(paths, _template(models, workload, devices[0], engines[0]),
                           leave_out=len({name for name, _, _ in blocks}) == len(blocks))
    base = evaluate(program, unchecked=frozenset(k for k, rc in program.cells.items()
                                                 if rc.form == "require" and k[0].startswith("plan__")))
    users = int(base[(workload, "users")])
    result = Plan(workload, models, engines)
    for model in models:
        if progress is not None:
            progress(model)
        planner = Planner(program, base, f"plan__{model}", users, float(base[(workload, "requests_per_second")]))
        candidates = candidates_for(program, base, model, devices, engines, max_gpus)
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


def _blocks(paths: list) -> list:
    """(name, kind, from the prelude) of every block the specs load, without resolving them."""
    from .build import raise_workspace
    from .loader import load

    workspace = load(paths)
    if workspace.errors:
        raise_workspace(workspace)
    return [(block.name, block.kind, prelude) for block, prelude in workspace.blocks]


def _with_blocks(paths: list, blocks: list, leave_out: bool = False):
    """The program of `paths` and the planner's own blocks, loaded from memory (nothing is written).

    With `leave_out`, the deployments of `paths` are left out: the plan reads
    none of them, and resolving them would cost most of the time.  Should
    another block read one, the whole program is built and says what is wrong.
    """
    from pathlib import Path

    from .api import build_program
    from .loader import overlaid

    spec = Path.cwd() / "<plan>.kvspec"  # a name no file has: the loader reads the text given for it
    imports = [f'import "{Path(p).resolve()}"' for p in paths]
    with overlaid({spec: "\n".join(imports + blocks) + "\n"}):
        if leave_out:
            try:
                return build_program([str(spec)], leave_out=("deployment",))
            except KvdslError:
                pass
        return build_program([str(spec)])


def _pick(name: str, names: list, kind: str) -> str:
    if name not in names:
        raise UsageError(f"no {kind} `{name}`", hint=did_you_mean(name, names) or f"{kind}s: " + ", ".join(names))
    return name
