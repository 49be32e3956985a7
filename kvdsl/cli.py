"""The `kvdsl` command: thin click commands over the library."""

from __future__ import annotations

import functools
import json
import os
import traceback
import sys

import click

from .errors import KvdslError, UsageError

EXIT_SPEC_ERROR = 1
EXIT_USAGE_ERROR = 2
EXIT_INTERNAL_ERROR = 3
PLAN_ROWS = 15  # the options `plan` prints (--json lists every one)
EXIT_NO_ANSWER = 1  # `solve` and `plan` found nothing that meets the condition (the reason is printed)


def reports_errors(fn):
    """Print kvdsl errors as `path:line:col: error: ...` and exit 1 (2 for usage)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _fewer_collections()
        try:
            return fn(*args, **kwargs)
        except UsageError as exc:
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_USAGE_ERROR)
        except KvdslError as exc:
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_SPEC_ERROR)
        except RecursionError:
            click.echo("error: the spec nests too deeply to evaluate (an expression or a chain of rules "
                       "thousands of levels deep)", err=True)
            sys.exit(EXIT_SPEC_ERROR)
        except BrokenPipeError:  # the reader went away (`| head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # a bug in kvdsl, not the user's mistake: say so plainly
            if os.environ.get("KVDSL_DEBUG"):
                traceback.print_exc()
            click.echo(f"internal error: {type(exc).__name__}: {exc}\n"
                       "this is a bug in kvdsl; run with KVDSL_DEBUG=1 for the traceback", err=True)
            sys.exit(EXIT_INTERNAL_ERROR)

    return wrapper


def _fewer_collections() -> None:
    """Collect cyclic garbage less often: a command builds one large, long-lived program.

    With the default thresholds, a spec of 100,000 cells spends about as long
    in the garbage collector as in resolving; the imports are frozen out of
    its reach and the youngest generation is collected every 50,000
    allocations instead of every 700.  Only the first command of a process
    freezes (a process that runs many, such as the fuzzer, keeps collecting
    what they leave).
    """
    import gc

    if gc.get_threshold()[0] != _YOUNGEST:
        gc.freeze()
        gc.set_threshold(_YOUNGEST, 20, 20)


_YOUNGEST = 50_000


def _release_memory() -> None:
    """Empty SymPy's caches and the kept programs: what they hold is garbage once the formulas are printed."""
    import sys

    from .api import forget_programs

    forget_programs()
    if "sympy" in sys.modules:
        from sympy.core.cache import clear_cache

        clear_cache()


def _settings(values):
    from .api import parse_setting

    return [parse_setting(v) for v in values]


set_option = click.option(
    "--set", "sets", multiple=True, metavar="[BLOCK.]CELL=VALUE",
    help="Override a cell: in every block that has it, or in one block. VALUE is kvspec (32K, 80 GiB, fp8).",
)
paths_argument = click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvdsl")
def main():
    """kvdsl: plan GPU memory for LLM serving from declarative .kvspec files."""


@main.command()
@paths_argument
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: ok, blocks per kind, cells, and errors as objects (path, line, column, kind, message, hint).")
@reports_errors
def check(paths, as_json):
    """Evaluate specs without printing them: report every error `eval` would."""
    from .api import evaluate_paths
    from .errors import error_json, flatten

    try:
        program, _ = evaluate_paths(paths)
    except KvdslError as exc:
        if not as_json:
            raise
        click.echo(json.dumps({"ok": False, "errors": [error_json(e) for e in flatten(exc)]}, indent=2))
        sys.exit(EXIT_USAGE_ERROR if isinstance(exc, UsageError) else EXIT_SPEC_ERROR)
    blocks = program.user_blocks()
    kinds = {}
    for b in blocks:
        kinds[b.kind] = kinds.get(b.kind, 0) + 1
    cells = sum(len(b.cells) for b in blocks)
    if as_json:
        click.echo(json.dumps({"ok": True, "blocks": kinds, "cells": cells, "errors": []}, indent=2))
        return
    summary = ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in kinds.items())
    click.echo(f"ok: {summary or 'no blocks'}; {cells:,} cells")


@main.command("fmt")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--check", "check_only", is_flag=True, help="Write nothing; list the files that would change and exit 1 if any would.")
@click.option("--diff", "show_diff", is_flag=True, help="Write nothing; print the changes as a unified diff.")
@reports_errors
def fmt_command(paths, check_only, show_diff):
    """Lay out specs in kvspec's one format: files, or directories searched for *.kvspec."""
    from .fmt import format_file, spec_paths, unified_diff, write_formatted

    changed = unchanged = failed = 0
    for path in spec_paths(paths):
        result = format_file(path)
        if result.error is not None:
            failed += 1
            click.echo(result.error.render(), err=True)
            continue
        if not result.changed:
            unchanged += 1
            continue
        changed += 1
        if show_diff:
            click.echo(unified_diff(result), nl=False)
        elif check_only:
            click.echo(f"would format {path}")
        else:
            write_formatted(result)
            click.echo(f"formatted {path}")
    if not show_diff:
        click.echo(_fmt_summary(changed, unchanged, failed, check_only))
    if failed or (check_only and changed):
        sys.exit(EXIT_SPEC_ERROR)


def _fmt_summary(changed, unchanged, failed, check_only):
    def files(n):
        return f"{n} file{'' if n == 1 else 's'}"

    parts = []
    if changed:
        parts.append(f"{files(changed)} {'would be formatted' if check_only else 'formatted'}")
    if unchanged or not (changed or failed):
        parts.append(f"{files(unchanged)} {'already formatted' if check_only else 'unchanged'}")
    if failed:
        parts.append(f"{files(failed)} not formatted (errors above)")
    return ", ".join(parts)


def _cell_list(text):
    """`--cells a,b,c` -> ['a', 'b', 'c'] (None when not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--cells needs cell names separated by commas, e.g. --cells max_batch,fits")
    return names


cells_option = click.option("--cells", "cells", metavar="A,B,...", help="Print only these cells, in this order.")


@main.command("eval")
@paths_argument
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: blocks -> cells -> value and unit (base units).")
@click.option("--all", "every", is_flag=True, help="List the cells of every engine, not only the deployment's own engine.")
@cells_option
@reports_errors
def eval_command(paths, sets, as_json, every, cells):
    """Evaluate every cell of every block."""
    from .api import evaluate_paths
    from .report import check_cells, eval_json, eval_text

    cells = _cell_list(cells)
    program, values = evaluate_paths(paths, _settings(sets))
    if cells:
        check_cells(program, cells)
    if as_json:
        click.echo(json.dumps(eval_json(program, values, cells), indent=2))
    else:
        click.echo(eval_text(program, values, every, cells))


@main.command()
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


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--for", "cell", required=True, metavar="CELL", help="The cell to solve for (batch, context, gpus, kv_bytes_per_element, ...).")
@click.option("--block", metavar="BLOCK", help="The block to solve in (needed when several have CELL).")
@set_option
@click.option("--symbolic", "symbolic", multiple=True, metavar="NAME", help="Keep NAME as a symbol in the closed form.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@reports_errors
def solve(path, cell, block, sets, symbolic, as_json):
    """Solve a block's `fits` constraint for one cell: closed form, number, regimes."""
    from .api import build_program, choose_block
    from .solve import CONSTRAINT, render, solve as solve_cell

    program = build_program([path], _settings(sets))
    block = choose_block(program, cell, block, needs=CONSTRAINT)
    solution = solve_cell(program, block, cell, symbolic)
    if as_json:
        click.echo(json.dumps(solution.to_json(), indent=2))
    else:
        click.echo(render(solution))
    if solution.value is None:
        sys.exit(EXIT_NO_ANSWER)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
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
    from .plan import plan as make_plan, render

    models = [m.strip() for m in model.split(",") if m.strip()] if model else None
    result = make_plan(list(paths), workload, models, hardware.split(",") if hardware else None, engine, max_gpus,
                       checked=None if as_json else PLAN_ROWS * 3)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(render(result, top=PLAN_ROWS))
    if not result.options:
        sys.exit(EXIT_NO_ANSWER)


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--vary", "vary", multiple=True, required=True, metavar="NAME=START:STOP[:STEP|:xFACTOR]",
              help="A cell to vary over a range (STOP included); repeat for a grid.")
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

    from .api import build_program, choose_block
    from .sweep import MAX_JSON_POINTS, prepare, sweep_json, write_csv_chunks

    cells = _cell_list(cells)
    if out:
        from pathlib import Path

        from .files import check_writable

        check_writable(Path(out), force)
    program = build_program([path], _settings(sets))
    names = [v.partition("=")[0].strip() for v in vary]
    block = choose_block(program, names[0], block)

    started = time.perf_counter()
    compiled = prepare(program, block, list(vary))
    if cells:
        compiled.choose(cells)
    axes = compiled.axes
    compiled_at = time.perf_counter()
    total = compiled.size()
    evaluating = [0.0]

    def timed(chunks):
        """The chunks, one at a time, adding the time spent evaluating each."""
        while True:
            began = time.perf_counter()
            chunk = next(chunks, None)
            evaluating[0] += time.perf_counter() - began
            if chunk is None:
                return
            yield chunk

    def rows(progress=None):
        return timed(compiled.chunks(progress))

    def write(stream):
        if total > 1_000_000 and not as_json:
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
        write(click.get_text_stream("stdout"))
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


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
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

    program, values = evaluate_paths([path], _settings(sets))
    block = choose_block(program, cell, block)
    key = find_key(program, block, cell)
    if as_json:
        click.echo(json.dumps(explain_json(program, values, key, depth), indent=2))
    else:
        click.echo(explain_cell(program, values, key, depth))


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--block", metavar="BLOCK", help="The deployment to compare (needed when the file has several).")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures and reasons as JSON.")
@reports_errors
def compare(path, block, sets, as_json):
    """One deployment under every engine's accounting, with the rule behind each difference."""
    from .api import choose_block, evaluate_paths
    from .compare import compare as compare_engines
    from .compare import compare_json, compare_text, engines

    program, values = evaluate_paths([path], _settings(sets))
    block = choose_block(program, "engine", block)
    if program.blocks[block].kind != "deployment":
        raise UsageError(f"`{block}` is a {program.blocks[block].kind}: compare takes a deployment")
    result = compare_engines(program, values, block)
    if as_json:
        click.echo(json.dumps(compare_json(result), indent=2))
    else:
        click.echo(compare_text(result, {e.name: e.title for e in engines(program)}))


@main.command()
@paths_argument
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False), help="The .xlsx file to write.")
@set_option
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
@reports_errors
def export(paths, out, sets, force):
    """Write an Excel workbook in which every result is a live formula."""
    from .api import evaluate_paths
    from .excel.workbook import build_workbook, save_workbook

    if not out.lower().endswith(".xlsx"):
        raise UsageError(f"--out must name an .xlsx file, not `{out}`")
    from pathlib import Path

    from .files import check_writable

    check_writable(Path(out), force)
    workbook, written = build_workbook(*evaluate_paths(paths, _settings(sets)), list(paths))
    _release_memory()  # nothing refers to the program now: saving reuses its memory
    save_workbook(workbook, out, force)
    click.echo(f"wrote {out}: {written['blocks']} blocks, {written['formulas']:,} formulas, "
               f"{written['names']:,} defined names; sheets: {', '.join(written['sheets'])}")


@main.command("import")
@click.argument("source", type=click.Path())
@click.option("-o", "--out", "out", type=click.Path(), help="The .kvspec to write, or a directory (one NAME.kvspec per config).")
@click.option("--name", metavar="NAME", help="The model block's name (default: from the model's published name).")
@click.option("--title", metavar="TITLE", help="The model's title (default: its published name).")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@click.option("--strict", is_flag=True, help="Refuse to assume anything the config does not say.")
@reports_errors
def import_command(source, out, name, title, force, strict):
    """Turn a published config.json (or a folder of them) into model specs."""
    from pathlib import Path

    from .files import atomic_writer, check_writable
    from .hf import check_options, config_files, import_all

    check_options(name, title)
    files = config_files(source)
    if len(files) > 1 and (name or title):
        raise UsageError("--name and --title name one model: import a folder without them")
    models = import_all(files, name, title, strict)
    for model in models:
        for assumption in model.assumptions:
            click.echo(assumption.render(), err=True)
    if out is None:
        click.echo("\n".join(model.render() for model in models), nl=False)
        return
    folder = Path(out).is_dir()
    if len(files) > 1 and not folder:
        raise UsageError(f"-o must name an existing directory when importing a folder, not `{out}`")
    targets = [Path(out) / f"{m.name}.kvspec" if folder else Path(out) for m in models]
    for target in targets:
        check_writable(target, force)
    for model, target in zip(models, targets):
        with atomic_writer(target, force=force) as stream:
            stream.write(model.render())
        click.echo(f"wrote {target}: model {model.name} ({len(model.cells) + 1} cells, "
                   f"{model.params.total / 1e9:.2f}B parameters)", err=True)


@main.command()
@reports_errors
def lsp():
    """Run the language server on stdin and stdout (for editors; needs `pip install 'kvdsl[lsp]'`)."""
    try:
        from .lsp import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        raise UsageError("`kvdsl lsp` needs pygls, which is not installed", hint="pip install 'kvdsl[lsp]'") from None
    serve()


def _model_settings(paths, settings):
    """Table settings apply to the models, not to deployments."""
    from .api import Setting, build_program

    if not settings:
        return []
    program = build_program(paths)
    models = [b.name for b in program.user_blocks() if b.kind == "model"]
    return [Setting(m, s.cell) for m in models for s in settings]


if __name__ == "__main__":  # pragma: no cover
    main()
