"""The `kvdsl` commands over spec files themselves: check, fmt, export, import and lsp."""

from __future__ import annotations

import json
import sys

import click

from .cli_common import (EXIT_SPEC_ERROR, EXIT_USAGE_ERROR, parsed_settings, paths_argument, reports_errors,
                         set_option)
from .errors import KvdslError, UsageError
from .progress import done


@click.command()
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
    done()
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


@click.command("fmt")
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


def _release_memory() -> None:
    """Empty SymPy's caches and the kept programs: what they hold is garbage once the formulas are printed."""
    import sys

    from .api import forget_programs

    forget_programs()
    if "sympy" in sys.modules:
        from sympy.core.cache import clear_cache

        clear_cache()


@click.command()
@paths_argument
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False), help="The .xlsx file to write.")
@set_option
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
@reports_errors
def export(paths, out, sets, force):
    """Write an Excel workbook in which every result is a live formula."""
    from .api import evaluate_paths
    from .excel.saving import save_workbook
    from .excel.workbook import build_workbook

    if not out.lower().endswith(".xlsx"):
        raise UsageError(f"--out must name an .xlsx file, not `{out}`")
    from pathlib import Path

    from .files import check_writable

    check_writable(Path(out), force)
    workbook, written = build_workbook(*evaluate_paths(paths, parsed_settings(sets)), list(paths))
    _release_memory()  # nothing refers to the program now: saving reuses its memory
    save_workbook(workbook, out, force)
    done()
    click.echo(f"wrote {out}: {written['blocks']} blocks, {written['formulas']:,} formulas, "
               f"{written['names']:,} defined names; sheets: {', '.join(written['sheets'])}")


@click.command("import")
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
    from .errors import raise_all
    from .hf import check_options, config_files, import_each

    check_options(name, title)
    files = config_files(source)
    if len(files) > 1 and (name or title):
        raise UsageError("--name and --title name one model: import a folder without them")
    if out is not None and len(files) > 1 and not Path(out).is_dir():
        raise UsageError(f"-o must name an existing directory when importing a folder, not `{out}`")
    models, failed = import_each(files, name, title, strict)
    if len(files) == 1 and failed:
        raise failed[0][1]
    for model in models:
        for assumption in model.assumptions:
            click.echo(assumption.render(), err=True)
    if out is None:
        click.echo("\n".join(model.render() for model in models), nl=False)
    else:
        folder = Path(out).is_dir()
        targets = [Path(out) / f"{m.name}.kvspec" if folder else Path(out) for m in models]
        for target in targets:
            check_writable(target, force)
        for model, target in zip(models, targets):
            with atomic_writer(target, force=force) as stream:
                stream.write(model.render())
            click.echo(f"wrote {target}: model {model.name} ({len(model.cells) + 1} cells, "
                       f"{model.params.total / 1e9:.2f}B parameters)", err=True)
    if failed:
        # a folder: every config that imports is written; the others' errors follow, and the exit status is 1
        for path, exc in failed:
            click.echo(f"not imported: {path}", err=True)
        raise_all([error for _, exc in failed for error in (exc.errors if hasattr(exc, "errors") else [exc])])


@click.command()
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
