"""Shared helpers for the workbook tests: export, recalculate in LibreOffice, read named cells."""

from __future__ import annotations

import json
import math
import os
import re
from fractions import Fraction
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_helpers import answered
from kvdsl.cli import main
from kvdsl.excel.names import excel_name

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "specs" / "catalog.kvspec"
EXPORT_COMMAND = "kvdsl export specs/catalog.kvspec -o exports/catalog.xlsx --force"
ERROR_MARKERS = ("#NAME?", "#VALUE!", "#REF!", "#DIV/0!", "#N/A", "#NUM!", "Err:")

# LibreOffice tests: skipped only on a developer machine without soffice; in CI
# (the CI variable set) they run, and fail if soffice is missing.
SOFFICE_MISSING = shutil.which("soffice") is None and not os.environ.get("CI")


def libreoffice(fn):
    """Mark a test as needing LibreOffice (see SOFFICE_MISSING)."""
    fn = pytest.mark.skipif(SOFFICE_MISSING, reason="LibreOffice (soffice) is not installed")(fn)
    return pytest.mark.libreoffice(fn)


def cli(*args):
    """Run `kvdsl ARGS...` in-process; returns click's Result."""
    return CliRunner().invoke(main, [str(a) for a in args])


def export(paths, out, *extra) -> Path:
    """`kvdsl export PATHS -o OUT --force EXTRA...`; asserts it succeeds."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    result = cli("export", *paths, "-o", out, "--force", *extra)
    assert result.exit_code == 0, (result.output, result.exception)
    return Path(out)


class Exported:
    """What `kvdsl export` printed and how it ended, kept for a workbook exported once."""

    def __init__(self, exit_code: int, stdout: str):
        self.exit_code, self.stdout, self.output, self.exception = exit_code, stdout, stdout, None


def shared_catalog_export(tmp_path_factory) -> tuple:
    """`kvdsl export specs/catalog.kvspec`, run from the repository root once per
    test run and shared by every test and worker: (Exported, the workbook's path).

    The workbook is alone in its directory; the tests only read it.
    """
    import fcntl

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent / f"catalog-{run}" if run else base / "catalog-shared"
    shared.mkdir(exist_ok=True)
    out, printed = shared / "catalog" / "catalog.xlsx", shared / "export.out"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker exports, the others wait for it
        if not printed.exists():
            out.parent.mkdir(exist_ok=True)
            here = os.getcwd()
            os.chdir(ROOT)  # the export records the spec path as given
            try:
                result = cli("export", "specs/catalog.kvspec", "-o", out)
            finally:
                os.chdir(here)
            assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
            printed.write_text(f"{result.exit_code}\n{result.stdout}", encoding="utf-8")
    code, _, stdout = printed.read_text(encoding="utf-8").partition("\n")
    return Exported(int(code), stdout), out


def eval_json(paths, settings=()) -> dict:
    """`kvdsl eval PATHS --json --set S...` -> the `blocks` mapping."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    args = ["eval", *paths, "--json"]
    for s in settings:
        args += ["--set", s]
    result = cli(*args)
    assert answered(result), (result.output, result.exception)
    return json.loads(result.stdout)["blocks"]


NOTE_PARTS = re.compile(r"xl/comments/comment\d+\.xml|xl/drawings/commentsDrawing\d+\.vml")
NOTE_RELATION = re.compile(r'<Relationship [^>]*Type="[^"]*/(?:comments|vmlDrawing)"[^>]*/>')


def without_notes(source, out) -> Path:
    """Copy the xlsx `source` to `out` without its cells' notes (comments), byte for byte otherwise."""
    import zipfile

    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if NOTE_PARTS.fullmatch(item.filename):
                continue
            data = zin.read(item.filename)
            if re.fullmatch(r"xl/worksheets/_rels/sheet\d+\.xml\.rels", item.filename):
                data = NOTE_RELATION.sub("", data.decode("utf-8")).encode("utf-8")
            elif re.fullmatch(r"xl/worksheets/sheet\d+\.xml", item.filename):
                data = re.sub(r"<legacyDrawing [^>]*/>", "", data.decode("utf-8")).encode("utf-8")
            elif item.filename == "[Content_Types].xml":
                data = re.sub(r'<Override PartName="/xl/comments/[^"]*"[^>]*/>', "", data.decode("utf-8")).encode("utf-8")
            zout.writestr(item, data)
    return Path(out)


def recalculate(paths, outdir=None, profile=None) -> list:
    """Recalculate workbooks in ONE LibreOffice run; returns the recalculated paths (same order).

    LibreOffice reads copies without the cells' notes (`without_notes`): they
    hold no value, and loading the catalog's twelve thousand takes LibreOffice
    25 of its 30 seconds.

    The output goes to `outdir` (default: `recalculated/` beside the first
    file) and LibreOffice uses its own profile (default: `lo-profile/` beside
    `outdir`), so concurrent runs do not collide.
    """
    paths = [Path(p) for p in paths]
    assert paths, "nothing to recalculate"
    assert len({p.name for p in paths}) == len(paths), "file names must differ: they share one output directory"
    soffice = shutil.which("soffice")
    assert soffice, "LibreOffice (soffice) is required for this test (CI is set, so it may not be skipped)"
    outdir = Path(outdir) if outdir else paths[0].parent / "recalculated"
    profile = Path(profile) if profile else outdir.parent / "lo-profile"
    outdir.mkdir(parents=True, exist_ok=True)
    bare = outdir.parent / f"{outdir.name}-without-notes"
    bare.mkdir(exist_ok=True)
    sources = [without_notes(p, bare / p.name) for p in paths]
    proc = subprocess.run(
        [soffice, f"-env:UserInstallation={profile.resolve().as_uri()}", "--headless",
         "--convert-to", "xlsx", "--outdir", str(outdir), *map(str, sources)],
        capture_output=True, text=True, timeout=1800)
    outs = [outdir / p.name for p in paths]
    missing = [str(o) for o in outs if not o.exists()]
    assert proc.returncode == 0 and not missing, (proc.returncode, missing, proc.stdout, proc.stderr)
    return outs


def destination(wb, name: str):
    """The one cell the defined name for `name` (`block.cell`, `_` rule applied) points at."""
    key = excel_name(name)
    assert key in wb.defined_names, f"no defined name `{key}` (for `{name}`)"
    dests = list(wb.defined_names[key].destinations)
    assert len(dests) == 1, f"`{key}` points at {dests}, not one cell"
    sheet, ref = dests[0]
    ref = ref.replace("$", "")
    assert ":" not in ref, f"`{key}` points at the range {sheet}!{ref}, not one cell"
    return wb[sheet][ref]


PLAN_REFERENCE = re.compile(r"^='(?P<sheet>[^']+)'!\$(?P<col>[A-Z]+)\$(?P<row>\d+)(?:\*(?P<factor>\d+)|/(?P<divisor>\d+))?$")
# a memory, rate or price typed in human units beside its named cell: `=E3*1073741824`, `=S3/3600`
BESIDE_REFERENCE = re.compile(r"^=(?P<col>[A-Z]+)(?P<row>\d+)(?:\*(?P<factor>\d+)|/(?P<divisor>\d+))$")


# a block named by its name, typed on the Plan sheet or beside the named cell, turned back into its id
NAME_REFERENCE = re.compile(r"^=INDEX\((?P<ids>all_\w+_ids), MATCH\((?:'(?P<sheet>[^']+)'!)?\$?(?P<col>[A-Z]+)\$?(?P<row>\d+), "
                            r"(?P<names>all_\w+_names), 0\)\)$")


def _range_values(wb, name: str) -> list:
    (sheet, ref), = wb.defined_names[name].destinations
    return [c.value for row in wb[sheet][ref.replace("$", "")] for c in row]


def typed_cell(wb, name: str):
    """(the cell a reader types `name` into, the factor to base units).

    A deployment's typed cells live on the Plan sheet in human units; its
    named cell reads them (`='Plan'!$B$21*1073741824`).  A model's or a
    hardware's memory, rate or price is typed in the human-unit column beside
    its named cell (`=E3*1073741824`, `=S3/3600`).  Any other input is typed
    where its name points, in base units.
    """
    target = destination(wb, name)
    match = NAME_REFERENCE.match(str(target.value)) if target.data_type == "f" else None
    if match is not None:  # the factor: each id's name
        names = dict(zip(_range_values(wb, match["ids"]), _range_values(wb, match["names"])))
        sheet = wb[match["sheet"]] if match["sheet"] else target.parent
        return sheet[f"{match['col']}{match['row']}"], names
    match = PLAN_REFERENCE.match(str(target.value)) if target.data_type == "f" else None
    if match is not None:
        factor = Fraction(1, int(match["divisor"])) if match["divisor"] else int(match["factor"] or 1)
        return wb[match["sheet"]][f"{match['col']}{match['row']}"], factor
    match = BESIDE_REFERENCE.match(str(target.value)) if target.data_type == "f" else None
    if match is not None and target.parent[f"{match['col']}{match['row']}"].data_type == "n":
        factor = int(match["factor"]) if match["factor"] else Fraction(1, int(match["divisor"]))
        return target.parent[f"{match['col']}{match['row']}"], factor
    return target, 1


def typed_value(value, factor):
    """`value` (base units, or a block's id) as a reader types it in a cell of `typed_cell`'s `factor`."""
    if isinstance(factor, dict):
        return factor[value]
    return value if factor == 1 or isinstance(value, (str, bool)) else float(Fraction(value) / factor)


def set_typed(wb, name: str, value) -> None:
    """Type `value` (base units, or a block's id) where a reader types `name`, converted to that cell's unit."""
    cell, factor = typed_cell(wb, name)
    cell.value = typed_value(value, factor)


def named(wb, name: str):
    """The value of the cell the defined name for `name` points at."""
    return destination(wb, name).value


def same_value(want, got) -> bool:
    """Booleans equal; numbers within a relative error of 1e-9."""
    if isinstance(want, bool):
        return got is want
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return got == want or math.isclose(got, want, rel_tol=1e-9, abs_tol=0.0)


def compare_numeric(wb, blocks: dict) -> tuple:
    """(count compared, mismatches) of every number/boolean in `eval --json` blocks against `wb`."""
    count, bad = 0, []
    for block, info in blocks.items():
        for cell, entry in info["cells"].items():
            want = entry["value"]
            if isinstance(want, str):
                continue
            if want is None:  # `none`: not applicable, #N/A in a spreadsheet (NA())
                count += 1
                got = named(wb, f"{block}.{cell}")
                if got != "#N/A":
                    bad.append((f"{block}.{cell}", "#N/A", got))
                continue
            count += 1
            try:
                got = named(wb, f"{block}.{cell}")
            except AssertionError as exc:
                bad.append((f"{block}.{cell}", want, f"<{exc}>"))
                continue
            if not same_value(want, got):
                bad.append((f"{block}.{cell}", want, got))
    return count, bad


def error_cells(wb) -> list:
    """Every cell of every sheet whose value is a spreadsheet error.

    #N/A is what a `none` value (a cost of a deployment that does not fit)
    computes to in a block's own cells: `compare_numeric` checks those are the
    ones `eval` says; on the sheets a reader reads (Plan, Summary, Comparison,
    What-if) it is an error like any other.
    """
    out = []
    for ws in wb.worksheets:
        block_sheet = ws.title in BLOCK_SHEETS
        for row in ws.iter_rows():
            for c in row:
                if isinstance(c.value, str) and any(m in c.value for m in ERROR_MARKERS):
                    if block_sheet and c.value == "#N/A":
                        continue
                    out.append(f"{ws.title}!{c.coordinate}={c.value}")
    return out


BLOCK_SHEETS = ("Deployments", "Models", "Hardware", "Workloads", "Formats", "Engines")
