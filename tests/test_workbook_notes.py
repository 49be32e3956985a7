"""The cells' notes as kvdsl writes them are the bytes openpyxl writes."""

import io
import zipfile

from openpyxl import Workbook
from openpyxl.comments import Comment
from openpyxl.writer.excel import ExcelWriter

from kvdsl.excel.saving import FixedTimeZip, save_fixed

NOTES = ["plain", "a & b < c > d \"quoted\" 'single'", "  leading and trailing  ", "two\nlines\tand a tab\r",
         "Unicode: µs, ×, —, 😀", "   ", "x" * 5000]


def _parts(save) -> dict:
    wb = Workbook()
    for sheet in range(2):
        ws = wb.active if sheet == 0 else wb.create_sheet("Other & <more>")
        for row, text in enumerate(NOTES, 1):
            ws.cell(row, 1 + sheet, f"value {row}")
            ws.cell(row, 1 + sheet).comment = Comment(text, "kvdsl" if row % 2 else "someone & co", width=300 + row,
                                                      height=80 + row)
    stream = io.BytesIO()
    save(wb, stream)
    with zipfile.ZipFile(stream) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _openpyxl(wb, stream) -> None:
    from kvdsl.excel.saving import FIXED_TIMESTAMP

    wb.properties.created = wb.properties.modified = FIXED_TIMESTAMP
    with FixedTimeZip(stream, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        ExcelWriter(wb, archive).save()


def test_notes_are_written_as_openpyxl_writes_them():
    ours, theirs = _parts(save_fixed), _parts(_openpyxl)
    assert list(ours) == list(theirs)
    assert any("comments" in name for name in ours) and any(name.endswith(".vml") for name in ours)
    for name in theirs:
        assert ours[name] == theirs[name], name
