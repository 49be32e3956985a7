"""`kvdsl compare`: one deployment under every engine's accounting, and why they differ.

The figures are the cells every engine reports (`defaults engine` in the
prelude); the reasons are the engine's own rules, as written, with their
values: the figures that differ from the ideal accounting and the rules they
are made of that differ too.  This module lays them out; it knows no formula.
"""

from __future__ import annotations

from .display import bytes_text, json_number, plain_number
from .evaluate import taken_branches
from .exprtext import expr_text
from .program import Form, Program, walk_refs

FIGURES = ("kv_bytes_per_token_per_gpu", "kv_cache_tokens", "num_blocks", "max_concurrency", "max_context")
HEADERS = ("engine", "KV/token/GPU", "KV tokens", "blocks", "concurrency", "max context")
BASELINE = "ideal"  # the engine whose figures the others are compared with
MAX_REASONS = 16


def engines(program: Program) -> list:
    """Every engine, the baseline first, then in load order."""
    found = program.engines()
    return sorted(found, key=lambda e: e.name != BASELINE)


def compare(program: Program, values: dict, block: str) -> dict:
    """Every engine's figures for `block`, and the rules behind each difference from the baseline."""
    v = lambda cell: values[(block, cell)]  # noqa: E731
    rows = {e.name: {figure: values[(block, f"{e.name}.{figure}")] for figure in FIGURES} for e in engines(program)}
    return {
        "block": block,
        "title": program.blocks[block].title,
        "engine": v("engine"),
        "context": v("context"),
        "batch": v("batch"),
        "engines": rows,
        "reasons": {name: reasons(program, values, block, name) for name in rows if name != BASELINE},
    }


def reasons(program: Program, values: dict, block: str, engine: str) -> list:
    """The engine's rules that make its figures differ from the baseline's, each with its values.

    Starting from the figures that differ, each rule is followed into the
    engine's own cells it reads, keeping those whose value differs from the
    cell of the same name in the baseline (or in the deployment).
    """
    queue = [(block, f"{engine}.{f}") for f in FIGURES if _differs(program, values, block, engine, f)]
    seen, out = set(queue), []
    while queue and len(out) < MAX_REASONS:
        key = queue.pop(0)
        rc = program.cells[key]
        if rc.form != Form.RULE:
            continue
        expr = taken_branches(rc.expr, values)
        out.append(_reason(program, values, key, expr))
        for ref in walk_refs(expr):
            target = program.cells[ref.key]
            if ref.key in seen or target.scope != engine or target.form != Form.RULE:
                continue
            seen.add(ref.key)
            if _differs(program, values, block, engine, target.local_name):
                queue.append(ref.key)
    return out


def _differs(program: Program, values: dict, block: str, engine: str, local: str) -> bool:
    value = values.get((block, f"{engine}.{local}"))
    for twin in ((block, f"{BASELINE}.{local}"), (block, local)):
        if twin in program.cells and program.cells[twin].scope != engine:
            return values.get(twin) != value
    return True


def _reason(program: Program, values: dict, key, expr) -> str:
    from .display import format_value

    rc = program.cells[key]
    value = format_value(values.get(key), rc.dim)
    rule = expr_text(expr, lambda r: r.text)
    substituted = expr_text(expr, lambda r: format_value(values.get(r.key), program.cells[r.key].dim))
    text = f"{rc.local_name} = {rule}"
    if substituted not in (value, rule):
        text += f" = {substituted}"
    if value != rule:
        text += f" = {value}"
    return text + (f"  ({rc.cell.doc})" if rc.cell.doc else "")


def compare_json(result: dict) -> dict:
    out = dict(result)
    out["engines"] = {name: {k: json_number(x) for k, x in row.items()} for name, row in result["engines"].items()}
    out["context"], out["batch"] = json_number(result["context"]), json_number(result["batch"])
    return out


def compare_text(result: dict, titles: dict) -> str:
    context, batch = plain_number(result["context"]), plain_number(result["batch"])
    lines = [f"{result['block']}: {result['title']}",
             f"context {context} tokens, batch {batch}; engine = {result['engine']} (marked *)", ""]
    table = [HEADERS]
    for name, row in result["engines"].items():
        table.append((
            name + (" *" if name == result["engine"] else ""),
            bytes_text(row["kv_bytes_per_token_per_gpu"]),
            plain_number(row["kv_cache_tokens"]),
            plain_number(row["num_blocks"]),
            f"{float(row['max_concurrency']):.2f}x",
            plain_number(row["max_context"]),
        ))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(HEADERS))]
    for r in table:
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    lines.append("")
    lines.append(f"KV tokens: the token figure each engine logs (ideal: tokens the KV budget holds); "
                 f"concurrency: requests of {context} tokens at once; max context: the longest context {batch} request(s) can each hold")
    for name, found in result["reasons"].items():
        lines.append("")
        lines.append(f"{name} ({titles[name]}) differs from {BASELINE} in these rules:")
        lines += [f"  - {reason}" for reason in found] or ["  - none: the same figures"]
    return "\n".join(lines)
