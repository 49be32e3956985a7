"""`kvdsl export` against the floor it cannot beat: openpyxl writing the same workbook.

In one run: exports the catalog with `kvdsl export`, loads the workbook it
wrote with openpyxl and dumps its contents (every cell's value or formula,
number format, font, fill, alignment, border and link; the comments; column
widths, hidden and grouped columns, row heights, merged cells, frozen panes and
print settings; the conditional formats, charts, data validations and defined
names), then times bare openpyxl scripts that write those contents into a new
workbook and save it: the floor writes everything but the cells' notes, the
floor with notes writes them too (openpyxl spends more time on the notes than
on the rest).  Each runs as its own process, alternately, N times; the medians
are printed, CPU time (user + system, which a busy machine disturbs less than
wall time), wall time and peak resident memory (`ru_maxrss`), and the median
ratios of paired runs.  The goals, against the floor: export at most 2x the
time and 1.5x the peak memory.  As in cli_vs_import.py, kvdsl's bytecode is
compiled first and the export runs twice before timing (the parsed files and
the built program kept).

    python benchmarks/export_vs_openpyxl.py [--runs 5] [--spec specs/catalog.kvspec]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
CATALOG = ROOT / "specs" / "catalog.kvspec"
from cli_vs_import import compile_bytecode, kvdsl_environment  # noqa: E402

GOALS = {"time": 2.0, "memory": 1.5}


def measure(args: list, env: dict) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident memory (MiB) of one process."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} exited with {proc.returncode}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def dump(xlsx: Path, out: Path) -> dict:
    """The contents of a workbook as plain data, pickled to `out`; returns counts."""
    from copy import copy

    from openpyxl import load_workbook

    wb = load_workbook(xlsx)
    sheets, styles = [], {}  # each distinct (font, fill, alignment, border) once: unpickling is not openpyxl's cost
    counts = {"cells": 0, "formulas": 0, "styled": 0, "comments": 0, "names": 0, "validations": 0,
              "conditional formats": 0, "charts": 0}
    for ws in wb.worksheets:
        cells, comments = [], []
        for row in ws.iter_rows():
            for cell in row:
                style = None
                if cell.has_style:
                    style = styles.setdefault((copy(cell.font), copy(cell.fill), copy(cell.alignment), copy(cell.border)),
                                              len(styles))
                if cell.value is None and style is None:
                    continue
                link = cell.hyperlink.location or cell.hyperlink.target if cell.hyperlink else None
                cells.append((cell.row, cell.column, cell.value, cell.number_format, style, link))
                counts["cells"] += cell.value is not None
                counts["styled"] += style is not None
                counts["formulas"] += isinstance(cell.value, str) and cell.value.startswith("=")
                if cell.comment is not None:
                    c = cell.comment
                    comments.append((cell.row, cell.column, c.text, c.author, c.width, c.height))
        columns = [(key, d.width, d.hidden, d.outlineLevel) for key, d in ws.column_dimensions.items()]
        rows = [(key, d.height, d.hidden) for key, d in ws.row_dimensions.items() if d.height or d.hidden]
        conditional = [(str(cf.sqref), rule) for cf in ws.conditional_formatting for rule in cf.rules]
        layout = {"columns": columns, "rows": rows, "merged": [str(r) for r in ws.merged_cells.ranges],
                  "freeze": ws.freeze_panes, "print_titles": ws.print_title_rows, "print_area": ws.print_area,
                  "orientation": ws.page_setup.orientation, "fit_width": ws.page_setup.fitToWidth,
                  "fit_height": ws.page_setup.fitToHeight, "fit": ws.sheet_properties.pageSetUpPr,
                  "conditional": conditional, "charts": list(ws._charts),
                  "validations": list(ws.data_validations.dataValidation)}
        counts["comments"] += len(comments)
        counts["validations"] += len(layout["validations"])
        counts["conditional formats"] += len(conditional)
        counts["charts"] += len(layout["charts"])
        sheets.append((ws.title, cells, comments, layout))
    names = [(name, dn.attr_text) for name, dn in wb.defined_names.items()]
    counts["names"] = len(names)
    with open(out, "wb") as stream:
        pickle.dump({"sheets": sheets, "names": names, "styles": list(styles)}, stream)
    return counts


def floor(data_path: str, out: str, notes: bool = True) -> None:
    """The bare openpyxl script: write the dumped contents into a new workbook and save it."""
    from openpyxl import Workbook
    from openpyxl.comments import Comment
    from openpyxl.workbook.defined_name import DefinedName

    with open(data_path, "rb") as stream:
        data = pickle.load(stream)
    wb = Workbook()
    wb.remove(wb.active)
    for title, cells, comments, layout in data["sheets"]:
        ws = wb.create_sheet(title)
        for row, col, value, number_format, style, link in cells:
            cell = ws.cell(row, col, value)
            if number_format != "General":
                cell.number_format = number_format
            if style is not None:
                cell.font, cell.fill, cell.alignment, cell.border = data["styles"][style]
            if link:
                cell.hyperlink = link
        for row, col, text, author, width, height in comments if notes else ():
            ws.cell(row, col).comment = Comment(text, author, width=width, height=height)
        for key, width, hidden, level in layout["columns"]:
            dim = ws.column_dimensions[key]
            dim.width, dim.hidden, dim.outlineLevel = width, hidden, level
        for key, height, hidden in layout["rows"]:
            ws.row_dimensions[key].height, ws.row_dimensions[key].hidden = height, hidden
        for ref in layout["merged"]:
            ws.merge_cells(ref)
        ws.freeze_panes = layout["freeze"]
        if layout["print_titles"]:
            ws.print_title_rows = layout["print_titles"]
        if layout["print_area"]:
            ws.print_area = layout["print_area"]
        ws.page_setup.orientation = layout["orientation"]
        ws.page_setup.fitToWidth, ws.page_setup.fitToHeight = layout["fit_width"], layout["fit_height"]
        ws.sheet_properties.pageSetUpPr = layout["fit"]
        for ref, rule in layout["conditional"]:
            ws.conditional_formatting.add(ref, rule)
        for chart in layout["charts"]:
            ws.add_chart(chart, chart.anchor)
        for dv in layout["validations"]:
            ws.add_data_validation(dv)
    for name, ref in data["names"]:
        wb.defined_names[name] = DefinedName(name, attr_text=ref)
    wb.save(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spec", default=str(CATALOG))
    parser.add_argument("--floor", nargs=3, metavar=("DUMP", "OUT", "NOTES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(*args.floor[:2], notes=args.floor[2] == "notes")
        return
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        exported, data, rewritten = Path(tmp, "kvdsl.xlsx"), Path(tmp, "dump.pickle"), Path(tmp, "floor.xlsx")
        env = kvdsl_environment(str(Path(tmp, "cache")))
        export = [sys.executable, "-m", "kvdsl", "export", args.spec, "-o", str(exported), "--force"]
        floors = {"floor": [sys.executable, __file__, "--floor", str(data), str(rewritten), "no notes"],
                  "floor with notes": [sys.executable, __file__, "--floor", str(data), str(rewritten), "notes"]}
        for _ in range(2):  # keep the parsed files, then the program, as for a user's next export
            measure(export, env)
        counts = dump(exported, data)
        print("workbook: " + ", ".join(f"{n:,} {what}" for what, n in counts.items()))
        runs = {name: [] for name in ("export", *floors)}
        for _ in range(args.runs):
            for name, command in floors.items():
                runs[name].append(measure(command, env))
            runs["export"].append(measure(export, env))
    median = {name: [statistics.median(run[i] for run in measured) for i in range(3)] for name, measured in runs.items()}
    print(f"medians of {args.runs} runs")
    for name, (wall, cpu, mib) in median.items():
        label = {"export": "export (kvdsl)", "floor": "floor (openpyxl)"}.get(name, name)
        print(f"{label:<18} {cpu:6.2f} s CPU  {wall:6.2f} s wall  {mib:6.1f} MiB peak")
    for floor_name in floors:
        for what, index in (("time", 1), ("memory", 2)):
            ratio = statistics.median(e[index] / f[index] for e, f in zip(runs["export"], runs[floor_name]))
            goal = GOALS[what] if floor_name == "floor" else None
            verdict = "" if goal is None else ("  ok" if ratio <= goal else f"  OVER the {goal}x goal")
            print(f"export / {floor_name:<17} {what:<7} {ratio:5.2f}x{verdict}")


if __name__ == "__main__":
    main()
