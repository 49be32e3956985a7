"""Results as text, JSON and CSV: the `eval` listing and the `table` rows."""

from __future__ import annotations

import csv
import io

from .display import bytes_text, context_label, format_value, gib_text, json_number, plain_number
from .graph import Program
from .labels import describe, is_labelled

KIND_ORDER = {"model": 0, "hardware": 1, "workload": 2, "deployment": 3}


def _ordered_blocks(program: Program):
    blocks = program.user_blocks()
    return sorted(blocks, key=lambda b: KIND_ORDER.get(b.kind, 4))


def check_cells(program: Program, cells: list) -> None:
    """`--cells`: every name must be a cell of some block."""
    from .errors import UsageError, did_you_mean

    every = {name for info in program.user_blocks() for name in info.cells}
    for name in cells:
        if name not in every:
            raise UsageError(f"--cells: no block has a cell `{name}`", hint=did_you_mean(name, every))


def _chosen(info, cells):
    """The cells of a block to print: all, or those of `cells` it has, in that order."""
    return list(info.cells) if cells is None else [n for n in cells if n in info.cells]


def eval_json(program: Program, values: dict, cells: list = None) -> dict:
    """The `eval --json` contract: blocks -> kind, title, cells -> value, unit.

    With `cells`, only those cells, and only the blocks that have one of them.
    """
    out = {}
    for info in _ordered_blocks(program):
        names = _chosen(info, cells)
        if cells is not None and not names:
            continue
        cells_out = {}
        for name in names:
            rc = program.cells[(info.name, name)]
            dim = rc.dim
            unit = dim.unit() if hasattr(dim, "unit") else None
            cells_out[name] = {"value": json_number(values[(info.name, name)]), "unit": unit}
        out[info.name] = {"kind": info.kind, "title": info.title, "cells": cells_out}
    return {"blocks": out}


def shown_cells(program: Program, values: dict, block: str, every: bool = False) -> list:
    """A block's cells as `eval` lists them: of the engines, only the chosen one's (all with `every`)."""
    chosen = values.get((block, "engine"))
    return [name for name in program.blocks[block].cells
            if every or program.cells[(block, name)].scope in (None, chosen)]


def eval_text(program: Program, values: dict, every: bool = False, cells: list = None) -> str:
    """A readable table per block, with a verdict line for each deployment.

    With `cells`, only those cells (no verdict), and only the blocks that have one of them.
    """
    if cells is not None:
        return _chosen_text(program, values, cells)
    parts = []
    for info in _ordered_blocks(program):
        lines = [f"{info.kind} {info.name} \"{info.title}\"  ({info.block.name_span})"]
        names = shown_cells(program, values, info.name, every)
        width = max((len(n) for n in names), default=0)
        shown = [format_value(values[(info.name, name)], program.cells[(info.name, name)].dim) for name in names]
        value_width = max((len(v) for v in shown if len(v) <= 24), default=0)  # a long text does not push labels away
        for name, value in zip(names, shown):
            rc = program.cells[(info.name, name)]
            label = f"  {describe(rc).label}" if is_labelled(rc) else ""
            lines.append(f"  {name:<{width}}  {value:<{value_width}}{label}".rstrip())
        if len(names) < len(info.cells):
            lines.append(f"  ({len(info.cells) - len(names):,} cells of the other engines: --all shows them)")
        if info.kind == "deployment":
            lines.append("  => " + deployment_verdict(info.name, values))
            if values.get((info.name, "engine"), "ideal") != "ideal":
                lines.append("  => " + engine_verdict(program, info.name, values))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _chosen_text(program: Program, values: dict, cells: list) -> str:
    parts = []
    failing = set(misfits(program, values))
    for info in _ordered_blocks(program):
        names = _chosen(info, cells)
        if not names:
            continue
        width = max(len(n) for n in names)
        lines = [f"{info.kind} {info.name} \"{info.title}\""]
        lines += [f"  {n:<{width}}  {format_value(values[(info.name, n)], program.cells[(info.name, n)].dim)}" for n in names]
        if info.name in failing and "verdict" not in names:  # why it fails, whatever cells were asked for
            lines.append("  => " + deployment_verdict(info.name, values))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def misfits(program: Program, values: dict) -> list:
    """The deployments that do not fit, or whose `?` has no answer, in the order they are printed."""
    return [info.name for info in _ordered_blocks(program) if info.kind == "deployment" and
            (values.get((info.name, "fits")) is False or any(values.get((info.name, n), 0) is None for n in info.cells))]


def deployment_verdict(block: str, values: dict) -> str:
    """The deployment's verdict: the prelude's `verdict` sentence (kvdsl/prelude/verdict.kvspec)."""
    verdict = values.get((block, "verdict"))
    return verdict if isinstance(verdict, str) else "incomplete: a `?` cell is not solved"


def engine_verdict(program: Program, block: str, values: dict) -> str:
    """What the deployment's engine would log at startup."""
    v = lambda name: values.get((block, name))  # noqa: E731
    engine = v("engine")
    if v("engine_max_concurrency") is None:
        return f"{engine}: incomplete, a `?` cell is not solved"
    return (f"{program.blocks[engine].title} would log {plain_number(v('engine_kv_cache_tokens'))} tokens of KV cache in "
            f"{plain_number(v('engine_num_blocks'))} blocks, and a maximum concurrency of {float(v('engine_max_concurrency')):.2f}x "
            f"for {plain_number(v('context'))} tokens per request (`kvdsl compare` shows why it differs from ideal)")


def table_rows(program: Program, values: dict) -> list:
    """One row per model block, the layout of the "One Table"."""
    rows = []
    for info in program.user_blocks():
        if info.kind != "model":
            continue
        v = lambda name: values[(info.name, name)]  # noqa: E731
        reduction = v("mha_reduction")
        rows.append({
            "block": info.name,
            "title": info.title,
            "scheme": v("scheme"),
            "kv_elements_per_token": json_number(v("kv_elements_per_token")),
            "mha_reduction": json_number(reduction) if reduction else None,
            "context": json_number(v("context")),
            "kv_dtype": v("kv_dtype"),
            "kv_bytes_per_sequence": json_number(v("kv_bytes_per_sequence")),
            "within_context_limit": v("within_context_limit"),
        })
    return rows


def table_text(rows: list) -> str:
    if not rows:
        return "no models"
    contexts = {r["context"] for r in rows}
    dtypes = {r["kv_dtype"] for r in rows}
    ctx = context_label(contexts.pop()) if len(contexts) == 1 else "context"
    dtype = dtypes.pop() if len(dtypes) == 1 else "kv_dtype"
    header = ["model", "scheme", "elem/token", "vs MHA", f"{ctx} cache ({dtype})"]
    body = []
    for r in rows:
        reduction = f"{r['mha_reduction']:.1f}x" if r["mha_reduction"] else "-"
        cache = r["kv_bytes_per_sequence"]
        mark = "" if r["within_context_limit"] else " *"
        body.append([r["title"], r["scheme"], f"{r['kv_elements_per_token']:,}", reduction,
                     (gib_text(cache) if cache >= 0.1 * 1024**3 or cache == 0 else bytes_text(cache)) + mark])
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header))]
    right = {2, 3, 4}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    lines = [line(header), line(["-" * w for w in widths])] + [line(r) for r in body]
    if not all(r["within_context_limit"] for r in rows):
        lines.append("* past the model's context limit (context_limit)")
    return "\n".join(lines)


def table_csv(rows: list) -> str:
    out = io.StringIO()
    fields = ["title", "block", "scheme", "kv_elements_per_token", "mha_reduction", "context", "kv_dtype", "kv_bytes_per_sequence",
              "within_context_limit"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: r[k] for k in fields})
    return out.getvalue()
