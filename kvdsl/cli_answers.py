"""The `kvdsl` commands that answer questions about specs: eval, table, solve, plan, sweep, explain, compare."""

from __future__ import annotations

import json
import sys

import click

from .cli_common import EXIT_NO_ANSWER, parsed_settings, paths_argument, reports_errors, set_option
from .errors import UsageError
from .progress import done, stage


PLAN_ROWS = 15  # the options `plan` prints (--json lists every one)


def _cell_list(text):
    """`--cells a,b,c` -> ['a', 'b', 'c'] (None when not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--cells needs cell names separated by commas, e.g. --cells max_batch,fits")
    return names


cells_option = click.option("--cells", "cells", metavar="A,B,...", help="Print only these cells, in this order.")


@click.command("eval")
@paths_argument
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: blocks -> cells -> value and unit (base units).")
@click.option("--all", "every", is_flag=True, help="List the cells of every engine, not only the deployment's own engine.")
@cells_option
@reports_errors
def eval_command(paths, sets, as_json, every, cells):
    """Evaluate every cell of every block.

    Exits 1 when a deployment does not fit (or a `?` has no answer), after printing every block.
    """
    from .api import evaluate_paths
    from .report import check_cells, eval_json, eval_text, misfits

    cells = _cell_list(cells)
    unanswered = []
    program, values = evaluate_paths(paths, parsed_settings(sets), unanswered)
    if cells:
        check_cells(program, cells)
    done()
    if as_json:
        click.echo(json.dumps(eval_json(program, values, cells), indent=2))
    else:
        click.echo(eval_text(program, values, every, cells))
    failing = misfits(program, values)
    for error in unanswered:
        click.echo(error.render(), err=True)
    if failing:
        deployments = sum(1 for b in program.user_blocks() if b.kind == "deployment")
        click.echo(f"{len(failing)} of {deployments} deployment{'s' if deployments != 1 else ''} "
                   f"{'does' if len(failing) == 1 else 'do'} not fit: {', '.join(failing)}", err=True)
    if failing or unanswered:
        sys.exit(EXIT_NO_ANSWER)


@click.command()
@paths_argument
@click.option("--context", "context", metavar="TOKENS", help="Context length, e.g. 32K or 8192 (default: each model's).")
@click.option("--kv-dtype", "kv_dtype", metavar="FORMAT", help="KV cache format, e.g. fp16, fp8, q4_0.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV rows.")
@reports_errors
def table(paths, context, kv_dtype, as_json, as_csv):
    """One row per model: scheme, elements per token, reduction vs MHA, cache per sequence."""
    from .api import evaluate_paths, parse_setting
    from .report import table_csv, table_rows, table_text

    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    settings = []
    if context:
        settings.append(parse_setting(f"context={context}", "--context"))
    if kv_dtype:
        settings.append(parse_setting(f"kv_dtype={kv_dtype}", "--kv-dtype"))
    program, values = evaluate_paths(paths, _model_settings(paths, settings))
    rows = table_rows(program, values)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif as_csv:
        click.echo(table_csv(rows), nl=False)
    else:
        click.echo(table_text(rows))


@click.command()
@click.argument("path", type=click.Path())
@click.option("--for", "cell", required=True, metavar="CELL", help="The cell to solve for (batch, context, gpus, kv_bytes_per_element, ...).")
@click.option("--block", metavar="BLOCK", help="The block to solve in (needed when several have CELL).")
@set_option
@click.option("--symbolic", "symbolic", multiple=True, metavar="NAME", help="Keep NAME as a symbol in the closed form.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@reports_errors
def solve(path, cell, block, sets, symbolic, as_json):
    """Solve a block's `fits` constraint for one cell: closed form, number, regimes."""
    from .api import build_program, choose_block
    from .search import CONSTRAINT
    from .solve import solve as solve_cell
    from .solve_text import render

    program = build_program([path], parsed_settings(sets))
    block = choose_block(program, cell, block, needs=CONSTRAINT)
    solution = solve_cell(program, block, cell, symbolic)
    if as_json:
        click.echo(json.dumps(solution.to_json(), indent=2))
    else:
        click.echo(render(solution))
    if solution.value is None:
        sys.exit(EXIT_NO_ANSWER)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--workload", "workload", metavar="W", help="The workload block to serve (default: chat_workload).")
@click.option("--model", "model", metavar="M,...", help="The models to serve, comma-separated (needed when the specs hold several).")
@click.option("--hardware", "hardware", metavar="H,...", help="Hardware blocks to try, comma-separated (default: every one in the specs).")
@click.option("--engine", "engine", metavar="E", help="The one engine to try (default: vllm, sglang and trtllm, each sized by its own accounting).")
@click.option("--max-gpus", "max_gpus", type=int, default=8, show_default=True, help="The most GPUs in one copy.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@reports_errors
def plan(paths, workload, model, hardware, engine, max_gpus, as_json):
    """The cheapest deployments that serve a workload within its targets, and how to launch them.

    Exits 1 when no option serves the workload (the cheapest rejections say why).
    """
    from .plan import plan as make_plan
    from .plan_text import render

    models = [m.strip() for m in model.split(",") if m.strip()] if model else None
    result = make_plan(list(paths), workload, models, hardware.split(",") if hardware else None, engine, max_gpus,
                       checked=None if as_json else PLAN_ROWS * 3, progress=lambda model: stage(f"planning {model}"))
    done()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(render(result, top=PLAN_ROWS))
    if not result.options:
        sys.exit(EXIT_NO_ANSWER)


@click.command()
@click.argument("path", type=click.Path())
@click.option("--vary", "vary", multiple=True, required=True, metavar="NAME=START:STOP[:STEP|:xFACTOR] | NAME=A,B,...",
              help="A cell to vary over a range (STOP included) or a list (numbers, formats, blocks, true/false); "
                   "repeat for a grid.")
@click.option("--block", metavar="BLOCK", help="The block to sweep (needed when several have the varied cells).")
@set_option
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Write the CSV here (atomically) instead of to stdout.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the varied cells, the result columns and the points (with --out: where they are).")
@cells_option
@reports_errors
def sweep(path, vary, block, sets, out, force, as_json, cells):
    """Evaluate a grid of what-ifs, compiled once and vectorized."""
    import time

    from .sweep import MAX_JSON_POINTS, prepare_sweep, sweep_json, write_csv_chunks

    cells = _cell_list(cells)
    if out:
        from pathlib import Path

        from .files import check_writable

        check_writable(Path(out), force)
    started = time.perf_counter()
    compiled = prepare_sweep([path], parsed_settings(sets), block, list(vary))
    if cells:
        compiled.choose(cells)
    axes = compiled.axes
    compiled_at = time.perf_counter()
    total = compiled.size()
    evaluating = [0.0]

    def timed(chunks):
        """The chunks, one at a time, adding the time spent evaluating each."""
        points = 0
        while True:
            stage(f"{points:,} of {total:,} points")
            began = time.perf_counter()
            chunk = next(chunks, None)
            evaluating[0] += time.perf_counter() - began
            if chunk is None:
                return
            points += chunk[1][0].size if chunk[1] else 1
            yield chunk

    def rows(progress=None):
        return timed(compiled.chunks(progress))

    def write(stream):
        if total > 1_000_000 and not as_json:
            done()  # click's bar shows the points instead
            with click.progressbar(length=total, label=f"{total:,} points", file=sys.stderr) as bar:
                write_csv_chunks(stream, compiled, rows(bar.update))
        else:
            write_csv_chunks(stream, compiled, rows())

    listed = None  # the points `--json` lists: the whole grid in memory, so only a small one
    if out:
        from .files import atomic_writer

        with atomic_writer(out, force=force) as stream:
            write(stream)
    elif as_json and total <= MAX_JSON_POINTS:
        began = time.perf_counter()
        listed = compiled.run()
        evaluating[0] += time.perf_counter() - began
    elif as_json:
        for _ in rows():
            pass
    else:
        done()  # the rows go to the terminal as they come
        write(sys.stdout)
    done()
    if as_json:
        inputs, results = listed if listed is not None else ([], [])
        summary = sweep_json(compiled, inputs, results, out)
        summary.update(compile_seconds=round(compiled_at - started, 4), evaluate_seconds=round(evaluating[0], 4))
        points = summary.pop("rows")
        text = json.dumps(summary, indent=2)  # one line per point: a grid stays readable and small
        lines = ",\n".join("    " + json.dumps(row) for row in points) if points else None
        body = "null" if points is None else ("[\n" + lines + "\n  ]" if lines else "[]")
        click.echo(text[:-2] + f',\n  "rows": {body}\n}}')
    if out:
        click.echo(f"wrote {out}: {total:,} rows x {len(axes) + len(compiled.results)} columns "
                   f"(compiled in {compiled_at - started:.2f} s, evaluated in {evaluating[0]:.2f} s)", err=True)


@click.command()
@click.argument("path", type=click.Path())
@click.argument("cell")
@click.option("--block", metavar="BLOCK", help="The block of CELL (needed when several have it).")
@set_option
@click.option("--depth", default=99, show_default=False, help="How many levels of references to follow.")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON: the cell and every rule visited.")
@reports_errors
def explain(path, cell, block, sets, depth, as_json):
    """How a number comes about: each rule, where it is defined, and its values."""
    from .api import choose_block, evaluate_paths
    from .explain import explain as explain_cell
    from .explain import explain_json
    from .search import find_key

    program, values = evaluate_paths([path], parsed_settings(sets))
    block = choose_block(program, cell, block)
    key = find_key(program, block, cell)
    if as_json:
        click.echo(json.dumps(explain_json(program, values, key, depth), indent=2))
    else:
        click.echo(explain_cell(program, values, key, depth))


@click.command()
@click.argument("path", type=click.Path())
@click.option("--block", metavar="BLOCK", help="The deployment to compare (needed when the file has several).")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures and reasons as JSON.")
@reports_errors
def compare(path, block, sets, as_json):
    """One deployment under every engine's accounting, with the rule behind each difference."""
    from .api import choose_block, evaluate_paths
    from .compare import compare as compare_engines
    from .compare import compare_json, compare_text, engines

    program, values = evaluate_paths([path], parsed_settings(sets))
    block = choose_block(program, "engine", block)
    if program.blocks[block].kind != "deployment":
        raise UsageError(f"`{block}` is a {program.blocks[block].kind}: compare takes a deployment")
    result = compare_engines(program, values, block)
    if as_json:
        click.echo(json.dumps(compare_json(result), indent=2))
    else:
        click.echo(compare_text(result, {e.name: e.title for e in engines(program)}))


def _model_settings(paths, settings):
    """Table settings apply to the models, not to deployments."""
    from .api import Setting, build_program

    if not settings:
        return []
    program = build_program(paths)
    models = [b.name for b in program.user_blocks() if b.kind == "model"]
    return [Setting(m, s.cell) for m in models for s in settings]
