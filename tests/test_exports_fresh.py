"""The committed exports/catalog.xlsx is what `kvdsl export` makes of the catalog today."""

from __future__ import annotations

import openpyxl

from workbook_helpers import EXPORT_COMMAND, ROOT, shared_catalog_export

COMMITTED = ROOT / "exports" / "catalog.xlsx"
FIX = f"exports/catalog.xlsx is stale: run `{EXPORT_COMMAND}` (from the repository root) and commit it"


def _cells(ws) -> dict:
    """coordinate -> (value, number_format) of every cell that holds something."""
    out = {}
    for row in ws.iter_rows():
        for c in row:
            if c.value is not None:
                out[c.coordinate] = (c.value, c.number_format)
    return out


def _names(wb) -> dict:
    return {name: sorted(dn.destinations) for name, dn in wb.defined_names.items()}


def test_committed_catalog_export_is_fresh(tmp_path_factory):
    assert COMMITTED.exists(), FIX
    result, fresh_path = shared_catalog_export(tmp_path_factory)
    assert result.exit_code == 0, result.output
    if fresh_path.read_bytes() == COMMITTED.read_bytes():  # the export is deterministic
        return
    committed, fresh = openpyxl.load_workbook(COMMITTED), openpyxl.load_workbook(fresh_path)

    assert committed.sheetnames == fresh.sheetnames, f"sheets differ: {committed.sheetnames} vs {fresh.sheetnames}; {FIX}"
    diffs = []
    for sheet in fresh.sheetnames:
        old, new = _cells(committed[sheet]), _cells(fresh[sheet])
        for coordinate in sorted(old.keys() | new.keys()):
            if old.get(coordinate) != new.get(coordinate):
                diffs.append(f"{sheet}!{coordinate}: committed {old.get(coordinate)!r}, fresh {new.get(coordinate)!r}")
    assert not diffs, f"{len(diffs)} cells differ, e.g.\n" + "\n".join(diffs[:10]) + f"\n{FIX}"

    old_names, new_names = _names(committed), _names(fresh)
    missing, extra = sorted(new_names.keys() - old_names.keys()), sorted(old_names.keys() - new_names.keys())
    assert not missing and not extra, f"defined names differ: missing {missing[:10]}, extra {extra[:10]}; {FIX}"
    moved = [f"{n}: committed {old_names[n]}, fresh {new_names[n]}" for n in sorted(new_names) if old_names[n] != new_names[n]]
    assert not moved, f"{len(moved)} defined names point elsewhere, e.g. {moved[:10]}; {FIX}"
