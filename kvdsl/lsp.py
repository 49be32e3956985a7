"""`kvdsl lsp`: a Language Server Protocol server over stdio, built on pygls.

Each open document is analysed (loaded with every open buffer in place of
its file, resolved, evaluated) on a worker thread, a short while after the
last change.  Diagnostics are published for every file an analysis found
errors in; hover, definitions and completion answer from the document's last
analysis that evaluated, so they stay fast while a new one runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from . import __version__
from . import lsp_analysis as an
from . import lsp_complete
from .build import store_pending
from .errors import KvdslError, Span, split_lines, source_line

STACK_BYTES = 256 * 2**20
DEBOUNCE_SECONDS = 0.25  # after a change, wait this long for the next before analysing
LOG = logging.getLogger("kvdsl.lsp")


# ---- positions: LSP counts code units (UTF-16 unless agreed otherwise) from 0, spans count characters from 1 ----


def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(ch) > 0xFFFF else 1


def client_column(line: str, column: int, encoding: str = "utf-16") -> int:
    """A 1-based character column on `line` -> the 0-based offset in the client's code units."""
    head = line[: max(column - 1, 0)]
    return sum(_units(ch, encoding) for ch in head) + max(column - 1 - len(head), 0)


def char_column(line: str, offset: int, encoding: str = "utf-16") -> int:
    """A 0-based offset in the client's code units on `line` -> the 1-based character column spans use."""
    units = 0
    for index, ch in enumerate(line):
        if units >= offset:
            return index + 1
        units += _units(ch, encoding)
    return len(line) + 1 + max(offset - units, 0)


def span_range(span, encoding: str = "utf-16", lines: Optional[list] = None) -> types.Range:
    """A Span -> an LSP range; `lines` (else the text last parsed) converts the columns."""
    def line_text(number):
        if lines is not None:
            return lines[number - 1] if 1 <= number <= len(lines) else ""
        return source_line(Span(span.path, number, 1, number, 1)) or ""

    start = types.Position(max(span.line - 1, 0), client_column(line_text(span.line), span.column, encoding))
    end = types.Position(max(span.end_line - 1, 0), client_column(line_text(span.end_line), span.end_column, encoding))
    return types.Range(start, end)


def diagnostic(error: KvdslError, encoding: str = "utf-16") -> types.Diagnostic:
    """A kvdsl error as an LSP diagnostic: its message, then its hint."""
    message = error.message + (f"\nhint: {error.hint}" if error.hint else "")
    where = span_range(error.span, encoding) if error.span is not None else types.Range(types.Position(0, 0), types.Position(0, 0))
    severity = types.DiagnosticSeverity.Warning if error.severity == "warning" else types.DiagnosticSeverity.Error
    return types.Diagnostic(where, message, severity=severity, source="kvdsl", code=type(error).__name__)


# ---- documents -------------------------------------------------------------------------------------


@dataclass
class Document:
    """An open document: its analyses, the last that evaluated, the files its errors were published to."""

    uri: str
    path: Path
    generation: int = 0
    pending: Optional[asyncio.Future] = None
    latest: Optional[an.Analysis] = None
    good: Optional[an.Analysis] = None
    published: dict = field(default_factory=dict)  # uri -> [Diagnostic]


class KvdslServer(LanguageServer):
    """The language server: documents, a one-thread analysis pool, and the published diagnostics."""

    def __init__(self):
        super().__init__("kvdsl", __version__)
        self.documents: dict = {}
        # hazard: evaluation recurses once per level of an expression (up to 20,000 frames);
        # a worker thread needs the stack the main thread has
        threading.stack_size(max(threading.stack_size(), STACK_BYTES))
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvdsl-analysis")

    @property
    def encoding(self) -> str:
        """The position encoding agreed with the client."""
        return str(self.workspace.position_encoding or "utf-16")

    def text(self, uri: str) -> Optional[str]:
        """The text of a document the editor holds, or None: never read from disk, where the path may be a
        FIFO that blocks, or gone (a request can arrive after, or outlast, its document's close)."""
        from urllib.parse import unquote

        held = self.workspace.text_documents.get(unquote(uri))
        return held.source if held is not None and uri in self.documents else None

    def overlay(self) -> dict:
        texts = {doc.path: self.text(doc.uri) for doc in self.documents.values()}
        return {path: text for path, text in texts.items() if text is not None}

    def schedule(self, doc: Document, delay: float) -> None:
        """Analyse the document again after `delay` seconds, unless a newer request comes first."""
        doc.generation += 1
        generation = doc.generation
        overlay = self.overlay()
        text = overlay.get(doc.path)
        if text is None:  # closed meanwhile
            return

        def work():
            if generation != doc.generation:  # a newer request is queued behind this one
                return None
            time.sleep(delay)
            if generation != doc.generation:
                return None
            return _without_collector_pauses(an.analyze, doc.path, text, overlay)

        future = asyncio.wrap_future(self.pool.submit(work))
        doc.pending = future
        future.add_done_callback(lambda f: self.analysed(doc, generation, f))

    def analysed(self, doc: Document, generation: int, future) -> None:
        if future.cancelled() or generation != doc.generation or doc.uri not in self.documents:
            return
        error = future.exception()
        if error is not None:  # a bug in kvdsl, not in the spec: say so where the user looks
            LOG.error("analysis of %s failed: %r", doc.uri, error)
            failed = an.Analysis(doc.path, an.display_path(doc.path), "", errors=[KvdslError(
                f"internal error: {type(error).__name__}: {error}; this is a bug in kvdsl")])
            self.publish(doc, failed)
            return
        analysis = future.result()
        if analysis is None:
            return
        doc.latest = analysis
        if analysis.good:
            doc.good = analysis
        self.publish(doc, analysis)
        self.pool.submit(store_pending)  # a program built for the second time is kept on disk, after the diagnostics
        for other in self.documents.values():  # files that import this one see its new text
            if other is not doc and other.latest is not None and doc.path != other.path and analysis.shown in other.latest.files:
                self.schedule(other, DEBOUNCE_SECONDS)

    def publish(self, doc: Document, analysis: an.Analysis) -> None:
        """Diagnostics for the document and for every file its errors are in; clear those gone."""
        found: dict = {doc.uri: []}
        for error in analysis.errors:
            if error.span is None or error.span.path.startswith("--set "):
                found[doc.uri].append(diagnostic(error, self.encoding))
                continue
            uri = doc.uri if error.span.path == analysis.shown else from_fs_path(str(an.source_file(error.span.path)))
            found.setdefault(uri, []).append(diagnostic(error, self.encoding))
        previous, doc.published = doc.published, found
        self.republish(set(previous) | set(found))

    def republish(self, uris) -> None:
        """Publish for each uri what every open document found there, once each."""
        for uri in uris:
            merged, seen = [], set()
            for other in self.documents.values():
                for d in other.published.get(uri, ()):
                    signature = (d.range.start.line, d.range.start.character, d.message)
                    if signature not in seen:
                        seen.add(signature)
                        merged.append(d)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=merged))

    async def analysis(self, uri: str) -> Optional[an.Analysis]:
        """The document's last analysis that evaluated (waiting for the first), else its latest."""
        doc = self.documents.get(uri)
        if doc is None:
            return None
        while doc.good is None and doc.pending is not None and not doc.pending.done():
            try:
                await asyncio.shield(doc.pending)
            except Exception:  # reported by `analysed`
                break
            await asyncio.sleep(0)  # let `analysed` run before looking again
        return doc.good or doc.latest


def _without_collector_pauses(fn, *args):
    """Run fn with the cycle collector off, then exempt what survives from its scans.

    hazard: an analysis of the catalog holds some 250,000 objects; with the
    collector on, each full collection scans them all and stops every thread
    for up to a second (a hover included).  An analysis makes no reference
    cycles (tests/test_lsp.py checks it), so objects it leaves behind are
    still freed by their reference counts once unused, frozen or not.
    """
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.freeze()
        gc.enable()


server = KvdslServer()


def _position(analysis: an.Analysis, position: types.Position, encoding: str) -> tuple:
    lines = split_lines(analysis.text)
    line = lines[position.line] if position.line < len(lines) else ""
    return position.line + 1, char_column(line, position.character, encoding)


def _location(path: Path, span, encoding: str) -> types.Location:
    if span is None:
        return types.Location(from_fs_path(str(path)), types.Range(types.Position(0, 0), types.Position(0, 0)))
    return types.Location(from_fs_path(str(path)), span_range(span, encoding))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: KvdslServer, params: types.DidOpenTextDocumentParams):
    uri = params.text_document.uri
    path = to_fs_path(uri)
    if path is None:
        return
    doc = Document(uri, Path(path).resolve())
    ls.documents[uri] = doc
    ls.schedule(doc, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: KvdslServer, params: types.DidChangeTextDocumentParams):
    doc = ls.documents.get(params.text_document.uri)
    if doc is not None:
        ls.schedule(doc, DEBOUNCE_SECONDS)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: KvdslServer, params: types.DidCloseTextDocumentParams):
    doc = ls.documents.pop(params.text_document.uri, None)
    if doc is not None:
        doc.generation += 1
        ls.republish(doc.published)


@server.feature(types.SHUTDOWN)
def shutdown(ls: KvdslServer, params):
    for doc in ls.documents.values():  # queued analyses return at once
        doc.generation += 1
    ls.pool.shutdown(wait=False, cancel_futures=True)


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: KvdslServer, params: types.HoverParams):
    analysis = await ls.analysis(params.text_document.uri)
    if analysis is None:
        return None
    target = an.locate(analysis, *_position(analysis, params.position, ls.encoding))
    text = an.hover(analysis, target) if target is not None else None
    if text is None:
        return None
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text))


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(ls: KvdslServer, params: types.DefinitionParams):
    analysis = await ls.analysis(params.text_document.uri)
    if analysis is None:
        return None
    target = an.locate(analysis, *_position(analysis, params.position, ls.encoding))
    found = an.definition(analysis, target) if target is not None else None
    return _location(*found, ls.encoding) if found is not None else None


COMPLETION_KINDS = {
    "cell": types.CompletionItemKind.Field,
    "block": types.CompletionItemKind.Module,
    "format": types.CompletionItemKind.EnumMember,
    "engine": types.CompletionItemKind.Class,
    "unit": types.CompletionItemKind.Unit,
    "keyword": types.CompletionItemKind.Keyword,
    "function": types.CompletionItemKind.Function,
}


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]))
async def completion(ls: KvdslServer, params: types.CompletionParams):
    analysis = await ls.analysis(params.text_document.uri)
    text = ls.text(params.text_document.uri)
    if text is None:
        return types.CompletionList(is_incomplete=False, items=[])
    lines = split_lines(text)
    line = lines[params.position.line] if params.position.line < len(lines) else ""
    column = char_column(line, params.position.character, ls.encoding)
    items = [types.CompletionItem(c.label, kind=COMPLETION_KINDS[c.kind], detail=c.detail,
                                  documentation=c.doc or None, sort_text=("0" if c.first else "1") + c.label)
             for c in lsp_complete.complete(analysis, text, params.position.line + 1, column)]
    return types.CompletionList(is_incomplete=False, items=items)


SYMBOL_KINDS = {
    "block": types.SymbolKind.Struct,
    "defaults": types.SymbolKind.Namespace,
    "cell": types.SymbolKind.Field,
    "import": types.SymbolKind.File,
    "function": types.SymbolKind.Function,
}


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
async def document_symbol(ls: KvdslServer, params: types.DocumentSymbolParams):
    doc = ls.documents.get(params.text_document.uri)
    await ls.analysis(params.text_document.uri)
    analysis = next((a for a in (doc.latest, doc.good) if a is not None and a.spec is not None), None) if doc else None
    if analysis is None:
        return []
    lines = split_lines(analysis.text)

    def convert(symbol):
        return types.DocumentSymbol(
            name=symbol.name, detail=symbol.detail, kind=SYMBOL_KINDS[symbol.kind],
            range=span_range(symbol.span, ls.encoding, lines),
            selection_range=span_range(symbol.name_span, ls.encoding, lines),
            children=[convert(c) for c in symbol.children] or None)

    return [convert(s) for s in an.symbols(analysis.spec)]


@server.feature(types.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: KvdslServer, params: types.DocumentFormattingParams):
    try:
        from .fmt import format_text
    except ImportError:
        return []
    text = ls.text(params.text_document.uri)
    if text is None:
        return []
    try:
        formatted = format_text(text)
    except KvdslError:  # text that does not parse is left as it is; diagnostics say why
        return []
    except Exception as exc:  # the formatter refused its own result: leave the text, say so
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"kvdsl fmt: {exc}"))
        return []
    if formatted == text:
        return []
    lines = text.split("\n")
    end = types.Position(len(lines) - 1, client_column(lines[-1], len(lines[-1]) + 1, ls.encoding))
    return [types.TextEdit(types.Range(types.Position(0, 0), end), formatted)]


def serve() -> None:
    """Run the server on stdin and stdout until the client exits."""
    logging.basicConfig(level=logging.WARNING)
    _ready_to_analyse()
    server.start_io()


def _ready_to_analyse() -> None:
    """Import what an analysis needs before the editor asks for one: the resolver, evaluation,
    the search that answers `?` cells and NumPy under it (a fifth of a first analysis otherwise)."""
    import numpy  # noqa: F401

    from . import api, build, evaluate, search  # noqa: F401


__all__ = ["serve", "server", "client_column", "char_column", "diagnostic"]
