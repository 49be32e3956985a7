"""The layouts `kvdsl plan` tries for a model: hardware, engine, KV and weight precisions, GPUs and stages,
expert and attention parallelism, and a prefill pool apart.

`candidates_for` lists every one; `STAND_INS` names the blocks of the plan's
template deployment that a candidate's real blocks stand in for.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


ENGINES = ("vllm", "sglang", "trtllm")  # tried when --engine names none
STAGES = (1, 2, 4)  # pipeline stages tried, where they divide the GPUs
# a prefill pool apart (disaggregated serving): its GPUs as a share of the decode GPUs, tried where a whole number
# of GPUs, and the copy's GPUs together within the most GPUs per copy
PREFILL_RATIOS = (Fraction(1, 2), Fraction(1), Fraction(2))
STAND_INS = {"hardware": "plan__hardware", "kv_dtype": "plan__kv", "weight_dtype": "plan__weights",
             "expert_weight_dtype": "plan__experts"}


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
    attention_data_parallel: int = 1
    expert_parallel: int = 1
    prefill_gpus: int = 0


def candidates_for(program, base: dict, model: str, devices: list, engines: list, max_gpus: int) -> list:
    """Every layout to try for one model."""
    out = []
    moe = base[(model, "experts")] > 0 and base[(model, "experts_per_token")] < base[(model, "experts")]
    for device in devices:
        fp4 = base[(device, "flops_fp4")] > 0
        for weights, experts in _weight_choices(base, model, fp4):
            for kv in _kv_choices(base, model):
                for engine in engines:
                    for gpus in range(1, max_gpus + 1):
                        for stages in STAGES:
                            if stages <= gpus and gpus % stages == 0:
                                for layout in _parallel_layouts(gpus, stages, moe, max_gpus):
                                    out.append(Candidate(device, engine, kv, weights, experts, gpus, stages, *layout))
    return out


def _parallel_layouts(gpus: int, stages: int, moe: bool, max_gpus: int) -> list:
    """(attention replicas, expert-parallel GPUs, prefill GPUs) to try: tensor parallelism; for a mixture of
    experts on one stage, the experts over every GPU with the attention in tensor parallel (TP+EP) or in a
    replica per GPU (DEP); each of them on one stage also beside a prefill pool of a share of its GPUs."""
    layouts = [(1, 1)]
    if moe and stages == 1 and gpus > 1:
        layouts += [(1, gpus), (gpus, gpus)]
    out = [(replicas, experts, 0) for replicas, experts in layouts]
    if stages == 1:
        for ratio in PREFILL_RATIOS:
            prefill = gpus * ratio
            if prefill.denominator == 1 and gpus + prefill <= max_gpus:
                out += [(replicas, experts, int(prefill)) for replicas, experts in layouts]
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
