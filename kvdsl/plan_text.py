"""`kvdsl plan` as text: the options per model as a table, the cheapest one's launch command, the cheapest
rejections with their verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import Plan


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
            lines.append(f"  {'hardware':12} {'engines':18} {'GPUs x copies':>18} {'weights':>7} {'KV':>5} {'batch':>6} "
                         f"{'TTFT':>8} {'TPOT':>8} {'tok/s/GPU':>9} {'USD/month':>11} {'USD/1M tok':>10}")
            for o, engines in rows[:top]:
                lines.append(f"  {o['hardware']:12} {'/'.join(engines):18} {layout_text(o) + ' x ' + str(o['replicas']):>18} "
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


def layout_text(o: dict) -> str:
    """An option's GPUs per copy: `2 (1x2)` for 2 pipeline stages of 1, `8 DEP8` for 8 attention replicas with the
    experts over 8 GPUs, `8 TP8 EP8` for tensor-parallel attention with them, `4 + 2P` beside 2 prefill GPUs."""
    text = f"{o['gpus']}"
    if o["pipeline_stages"] > 1:
        text += f" ({o['gpus'] // o['pipeline_stages']}x{o['pipeline_stages']})"
    if o["attention_data_parallel"] > 1:
        text += f" DEP{o['expert_parallel']}" if o["attention_data_parallel"] == o["expert_parallel"] == o["gpus"] else \
            f" DP{o['attention_data_parallel']} EP{o['expert_parallel']}"
    elif o["expert_parallel"] > 1:
        text += f" TP{o['gpus']} EP{o['expert_parallel']}"
    return text + (f" + {o['prefill_gpus']}P" if o["prefill_gpus"] else "")


SAME = ("hardware", "gpus", "pipeline_stages", "attention_data_parallel", "expert_parallel", "prefill_gpus", "replicas",
        "weight_dtype", "kv_dtype", "batch", "cost_per_month")


def _rows(options: list) -> list:
    """(option, engines): options that differ only in their engine shown once, with every engine that gives them."""
    rows: dict = {}
    for o in options:
        rows.setdefault(tuple(o[k] for k in SAME), (o, []))[1].append(o["engine"])
    return list(rows.values())
