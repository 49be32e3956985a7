"""Render workbooks to PDF with LibreOffice and read their pages: which sheet each page prints.

`mark_sheets` copies a workbook and gives every sheet a page footer
`[[sheet:NAME]]` (LibreOffice fills in the sheet's name), so that in
`pdftotext -layout` output each page says which sheet it belongs to.  The
footer replaces the left part of any footer the sheet has; it takes the
same line a footer takes, so pages break as in the workbook itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

from workbook_helpers import without_notes

MARKER = re.compile(r"\[\[sheet:(.*?)\]\]")
FOOTER = "&amp;L[[sheet:&amp;A]]"
# Elements that follow <headerFooter> in a worksheet (ECMA-376 CT_Worksheet order).
AFTER_HEADER_FOOTER = ("rowBreaks", "colBreaks", "customProperties", "cellWatches", "ignoredErrors", "smartTags",
                       "drawing", "legacyDrawing", "legacyDrawingHF", "drawingHF", "picture", "oleObjects", "controls",
                       "webPublishItems", "tableParts", "extLst")


def tools_missing() -> str:
    """Why the render tests cannot run here ('' when soffice and pdftotext are both installed)."""
    missing = [tool for tool in ("soffice", "pdftotext") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed (poppler-utils gives pdftotext)" if missing else ""


def _with_footer(xml: str) -> str:
    """A worksheet's XML with the marker as the left part of its odd-page footer."""
    existing = re.search(r"<headerFooter\b[^>]*?(/>|>.*?</headerFooter>)", xml, re.S)
    if existing:
        block = existing.group(0)
        if block.endswith("/>"):
            new = block[:-2] + f"><oddFooter>{FOOTER}</oddFooter></headerFooter>"
        elif "<oddFooter>" in block:
            new = re.sub(r"<oddFooter>(.*?)</oddFooter>",
                         lambda m: f"<oddFooter>{FOOTER}{re.sub(r'&amp;L.*?(?=&amp;[CR]|$)', '', m.group(1))}</oddFooter>",
                         block, flags=re.S)
        else:
            new = block.replace("</headerFooter>", f"<oddFooter>{FOOTER}</oddFooter></headerFooter>")
        return xml.replace(block, new)
    element = f"<headerFooter><oddFooter>{FOOTER}</oddFooter></headerFooter>"
    for name in AFTER_HEADER_FOOTER:
        match = re.search(rf"<{name}[\s/>]", xml)
        if match:
            return xml[:match.start()] + element + xml[match.start():]
    return xml.replace("</worksheet>", element + "</worksheet>")


def mark_sheets(source: Path, out: Path) -> Path:
    """Copy the xlsx `source` to `out` with the sheet marker in every worksheet's footer.

    The copy has no notes (`without_notes`): they do not print, and loading
    them is most of LibreOffice's time.
    """
    bare = without_notes(source, out.with_name(out.stem + "-without-notes.xlsx"))
    with zipfile.ZipFile(bare) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if re.fullmatch(r"xl/worksheets/sheet\d+\.xml", item.filename):
                data = _with_footer(data.decode("utf-8")).encode("utf-8")
            zout.writestr(item, data)
    return out


def render_pdfs(paths, outdir: Path, profile: Path) -> list:
    """Convert workbooks to PDF in ONE LibreOffice run (its own profile); returns the PDF paths."""
    paths = [Path(p) for p in paths]
    outdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [shutil.which("soffice"), f"-env:UserInstallation={profile.resolve().as_uri()}", "--headless",
         "--convert-to", "pdf", "--outdir", str(outdir), *map(str, paths)],
        capture_output=True, text=True, timeout=1800)
    pdfs = [outdir / (p.stem + ".pdf") for p in paths]
    missing = [str(p) for p in pdfs if not p.exists()]
    assert proc.returncode == 0 and not missing, (proc.returncode, missing, proc.stdout, proc.stderr)
    return pdfs


def pdf_pages(pdf: Path) -> list:
    """The text of each page of `pdf` (`pdftotext -layout`)."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = text.split("\f")
    if pages and not pages[-1].strip():
        pages.pop()
    return pages


def sheet_of(page: str) -> str:
    """The sheet a page prints (from its footer marker); '' when the page has none."""
    match = MARKER.search(page)
    return match.group(1) if match else ""


def pages_per_sheet(pages: list) -> dict:
    """Sheet name -> how many pages print it, in print order."""
    counts: dict = {}
    for page in pages:
        sheet = sheet_of(page)
        counts[sheet] = counts.get(sheet, 0) + 1
    return counts


def pdf_font_sizes(pdf: Path) -> list:
    """(page, font size in points, text) of every run of text in `pdf`, from `pdftohtml -xml`.

    pdftohtml reports sizes at three times their points when asked to zoom by 3, whole numbers: a size
    is known to a third of a point."""
    root = _pdf_xml(pdf)
    sizes = {f.get("id"): int(f.get("size")) / 3 for f in root.iter("fontspec")}
    return [(int(page.get("number")), sizes[t.get("font")], "".join(t.itertext()))
            for page in root.iter("page") for t in page.iter("text")]


def pdf_overlaps(pdf: Path, skip=()) -> list:
    """(page, text, text) of runs of text in `pdf` printed over each other (their boxes share more than a
    quarter of the smaller), on the pages not numbered in `skip`."""
    found = []
    for page in _pdf_xml(pdf).iter("page"):
        if int(page.get("number")) in skip:
            continue
        boxes = [tuple(int(t.get(k)) for k in ("left", "top", "width", "height")) + ("".join(t.itertext()),)
                 for t in page.iter("text")]
        for i, (x, y, w, h, text) in enumerate(boxes):
            for x2, y2, w2, h2, text2 in boxes[i + 1:]:
                across, down = min(x + w, x2 + w2) - max(x, x2), min(y + h, y2 + h2) - max(y, y2)
                if across > 0 and down > 0 and across * down > 0.25 * min(w * h, w2 * h2):
                    found.append((int(page.get("number")), text, text2))
    return found


def _pdf_xml(pdf: Path):
    """The pages of `pdf` as `pdftohtml -xml` gives them, at three times their size (the root element)."""
    import xml.etree.ElementTree as ET

    xml = subprocess.run(["pdftohtml", "-xml", "-stdout", "-i", "-zoom", "3", str(pdf)],
                         capture_output=True, text=True, check=True).stdout
    return ET.fromstring(xml)
