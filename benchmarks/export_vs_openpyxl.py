"""`kvdsl export` against the floor it cannot beat: openpyxl writing the same workbook.

In one run: exports the catalog with `kvdsl export`, loads the workbook it
wrote with openpyxl and dumps its contents (every cell's value or formula,
number format, font, fill, alignment, border and link; the comments; column
widths, hidden and grouped columns, row heights, merged cells, frozen panes and
print settings; the conditional formats, charts, data validations and defined
names), then times a bare openpyxl script that writes those contents into a
new workbook and saves it (the floor).  Each side runs as its own process, alternately,
best of N; time is the wall time of the process, memory its peak resident
set (`ru_maxrss`).  Time is compared as CPU time (user + system), which a
busy machine disturbs less than wall time; both are printed.  The goals: export at most 2x the time and 1.5x the peak
memory of the floor.

    python benchmarks/export_vs_openpyxl.py [--runs 3] [--spec specs/catalog.kvspec]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "specs" / "catalog.kvspec"
GOALS = {"time": 2.0, "memory": 1.5}


def measure(args: list) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident memory (MiB) of one process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
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


def floor(data_path: str, out: str) -> None:
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
        for row, col, text, author, width, height in comments:
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
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default=str(CATALOG))
    parser.add_argument("--floor", nargs=2, metavar=("DUMP", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(*args.floor)
        return
    with tempfile.TemporaryDirectory() as tmp:
        exported, data, rewritten = Path(tmp, "kvdsl.xlsx"), Path(tmp, "dump.pickle"), Path(tmp, "floor.xlsx")
        export = [sys.executable, "-m", "kvdsl", "export", args.spec, "-o", str(exported), "--force"]
        floor_args = [sys.executable, __file__, "--floor", str(data), str(rewritten)]
        measure(export)  # warm the parse cache, as for a user's second run
        counts = dump(exported, data)
        print("workbook: " + ", ".join(f"{n:,} {what}" for what, n in counts.items()))
        best = {"export": [float("inf")] * 3, "floor": [float("inf")] * 3}
        for _ in range(args.runs):
            for name, command in (("floor", floor_args), ("export", export)):
                best[name] = [min(old, new) for old, new in zip(best[name], measure(command))]
    for name, (wall, cpu, mib) in best.items():
        label = name + (" (openpyxl)" if name == "floor" else " (kvdsl)")
        print(f"{label:<18} {cpu:6.2f} s CPU  {wall:6.2f} s wall  {mib:6.1f} MiB peak")
    time_ratio = best["export"][1] / best["floor"][1]
    memory_ratio = best["export"][2] / best["floor"][2]
    for what, ratio in (("time", time_ratio), ("memory", memory_ratio)):
        verdict = "ok" if ratio <= GOALS[what] else f"OVER the {GOALS[what]}x goal"
        print(f"export/floor {what:<7} {ratio:5.2f}x  {verdict}")


if __name__ == "__main__":
    main()
