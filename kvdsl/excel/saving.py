"""A workbook saved as an .xlsx file: written atomically, with fixed timestamps so that equal workbooks
are equal files."""

from __future__ import annotations

import datetime
import zipfile

from .formula import XML_UNSAFE


FIXED_TIMESTAMP = datetime.datetime(2000, 1, 1)  # the document's created/modified: the same bytes on every run


class FixedTimeZip(zipfile.ZipFile):
    """A zip archive whose entries are all dated FIXED_TIMESTAMP, so equal workbooks are equal files."""

    def entry(self, name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=FIXED_TIMESTAMP.timetuple()[:6])
        info.compress_type = self.compression
        info.external_attr = 0o600 << 16
        return info

    def write_parts(self, name: str, parts) -> None:
        """An entry made of the texts `parts` (UTF-8), each written as it comes: the same bytes as `writestr` of
        their join, without the whole text in memory (a large sheet's notes and their drawing)."""
        with self.open(self.entry(name), "w") as target:
            for part in parts:
                target.write(part.encode("utf-8"))

    def writestr(self, name, data, *args, **kwargs):
        return super().writestr(name if isinstance(name, zipfile.ZipInfo) else self.entry(name), data, *args, **kwargs)

    def write(self, filename, arcname=None, *args, **kwargs):
        import shutil

        with open(filename, "rb") as source, self.open(self.entry(arcname or filename), "w", force_zip64=True) as target:
            shutil.copyfileobj(source, target)


def save_fixed(wb, stream) -> None:
    """Save `wb` to `stream` as openpyxl does, but with fixed document and entry timestamps."""
    wb.properties.created = wb.properties.modified = FIXED_TIMESTAMP
    with FixedTimeZip(stream, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        _writer()(wb, archive).save()


def _writer():
    """openpyxl's ExcelWriter, writing the cells' notes as text: the same bytes, in a tenth of the time.

    hazard: openpyxl builds an XML tree of a dozen elements for each note and
    serializes it node by node; a catalog has fifteen thousand notes.
    `tests/test_workbook_notes.py` checks the parts against openpyxl's own.
    """
    from openpyxl.comments.author import AuthorList
    from openpyxl.comments.comment_sheet import CommentSheet
    from openpyxl.packaging.relationship import Relationship
    from openpyxl.utils import coordinate_to_tuple
    from openpyxl.utils.indexed_list import IndexedList
    from openpyxl.writer.excel import ExcelWriter

    class NotesWriter(ExcelWriter):
        def _write_comment(self, ws):
            notes = ws._comments
            if self.workbook.vba_archive is not None or not all(isinstance(n.text.t, str) and n.text.t for n in notes):
                return super()._write_comment(ws)  # a macro workbook's drawings, or an empty note: openpyxl's way
            authors = IndexedList()
            ids = [authors.add(note.author) for note in notes]
            sheet = CommentSheet(authors=AuthorList(authors), commentList=[])
            self._comments.append(sheet)
            sheet._id = len(self._comments)
            self._archive.write_parts(sheet.path[1:], notes_xml(notes, ids, authors))
            self.manifest.append(sheet)
            ws.legacy_drawing = f"xl/drawings/commentsDrawing{sheet._id}.vml"
            shapes = ((coordinate_to_tuple(note.ref), note.height, note.width) for note in notes)
            self._archive.write_parts(ws.legacy_drawing, shapes_vml(shapes))
            self.vba_modified.add(ws.legacy_drawing)
            ws._rels.append(Relationship(Id="comments", type=sheet._rel_type, Target=sheet.path))

    return NotesWriter


def _text(value: str) -> str:
    """XML text for `value`, control characters as U+FFFD (as text cells and formulas hold them)."""
    return XML_UNSAFE.sub("\ufffd", value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute(value: str) -> str:
    return (_text(value).replace('"', "&quot;").replace("\r", "&#13;").replace("\n", "&#10;")
            .replace("\t", "&#09;"))


def notes_xml(notes: list, ids: list, authors: list):
    """The comments part of a sheet, as openpyxl writes it (ElementTree's escaping), in parts."""
    yield '<comments xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><authors>'
    yield "".join(f"<author>{_text(author)}</author>" for author in authors)
    yield "</authors><commentList>"
    for note, author in zip(notes, ids):
        text = note.text.t
        stripped = text.strip()
        space = ' xml:space="preserve"' if stripped and text != stripped else ""
        yield (f'<comment ref="{_attribute(note.ref)}" authorId="{author}" shapeId="0"><text><t{space}>'
               f"{_text(text)}</t></text></comment>")
    yield "</commentList></comments>"


_SHAPE = ('<ns1:shape type="#_x0000_t202" style="position:absolute; margin-left:59.25pt;margin-top:1.5pt;'
          'width:{width}px;height:{height}px;z-index:1;visibility:hidden" fillcolor="#ffffe1" ns0:insetmode="auto" '
          'id="_x0000_s{id:04d}"><ns1:fill color2="#ffffe1" /><ns1:shadow color="black" obscured="t" />'
          '<ns1:path ns0:connecttype="none" /><ns1:textbox style="mso-direction-alt:auto">'
          '<div style="text-align:left" /></ns1:textbox><ns2:ClientData ObjectType="Note"><ns2:MoveWithCells />'
          '<ns2:SizeWithCells /><ns2:AutoFill>False</ns2:AutoFill><ns2:Row>{row}</ns2:Row>'
          '<ns2:Column>{column}</ns2:Column></ns2:ClientData></ns1:shape>')


def shapes_vml(shapes):
    """The legacy drawing of a sheet's notes ((row, column), height, width each), as openpyxl writes it, in parts."""
    yield ('<xml xmlns:ns0="urn:schemas-microsoft-com:office:office" xmlns:ns1="urn:schemas-microsoft-com:vml" '
           'xmlns:ns2="urn:schemas-microsoft-com:office:excel"><ns0:shapelayout ns1:ext="edit">'
           '<ns0:idmap ns1:ext="edit" data="1" /></ns0:shapelayout><ns1:shapetype id="_x0000_t202" '
           'coordsize="21600,21600" ns0:spt="202" path="m,l,21600r21600,l21600,xe"><ns1:stroke joinstyle="miter" />'
           '<ns1:path gradientshapeok="t" ns0:connecttype="rect" /></ns1:shapetype>')
    for number, ((row, column), height, width) in enumerate(shapes, 1026):
        yield _SHAPE.format(width=width, height=height, id=number, row=row - 1, column=column - 1)
    yield "</xml>"


def save_workbook(wb, out: str, force: bool = False) -> None:
    """Write `wb` to `out` atomically, with fixed timestamps."""
    from ..files import atomic_writer
    from ..progress import stage

    stage(f"saving {out}")
    with atomic_writer(out, force=force, binary=True) as stream:
        save_fixed(wb, stream)
