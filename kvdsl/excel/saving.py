"""A workbook saved as an .xlsx file: written atomically, with fixed timestamps so that equal workbooks
are equal files."""

from __future__ import annotations

import datetime
import zipfile


FIXED_TIMESTAMP = datetime.datetime(2000, 1, 1)  # the document's created/modified: the same bytes on every run


class FixedTimeZip(zipfile.ZipFile):
    """A zip archive whose entries are all dated FIXED_TIMESTAMP, so equal workbooks are equal files."""

    def entry(self, name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=FIXED_TIMESTAMP.timetuple()[:6])
        info.compress_type = self.compression
        info.external_attr = 0o600 << 16
        return info

    def writestr(self, name, data, *args, **kwargs):
        return super().writestr(name if isinstance(name, zipfile.ZipInfo) else self.entry(name), data, *args, **kwargs)

    def write(self, filename, arcname=None, *args, **kwargs):
        import shutil

        with open(filename, "rb") as source, self.open(self.entry(arcname or filename), "w", force_zip64=True) as target:
            shutil.copyfileobj(source, target)


def save_fixed(wb, stream) -> None:
    """Save `wb` to `stream` as openpyxl does, but with fixed document and entry timestamps."""
    from openpyxl.writer.excel import ExcelWriter

    wb.properties.created = wb.properties.modified = FIXED_TIMESTAMP
    with FixedTimeZip(stream, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        ExcelWriter(wb, archive).save()


def save_workbook(wb, out: str, force: bool = False) -> None:
    """Write `wb` to `out` atomically, with fixed timestamps."""
    from ..files import atomic_writer

    with atomic_writer(out, force=force, binary=True) as stream:
        save_fixed(wb, stream)
