"""`kvdsl lsp`: the real server, started as `python -m kvdsl lsp`, driven over stdio by pygls's client."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path, to_fs_path  # noqa: E402

from cli_helpers import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
PRELUDE = ROOT / "kvdsl" / "prelude"
WAIT = 60  # seconds a busy machine may take to analyse and answer

DEPLOYMENT = """\
import "../models/llama_3_1_70b.kvspec"
import "../hardware/h100_sxm.kvspec"

deployment llama_70b_h100x4 "Llama-3.1-70B on 4 x H100 SXM" {
    model = llama_3_1_70b
    hardware = h100_sxm
    gpus = 4
    kv_dtype = fp8
    context = 32K
    batch = 24
    engine = vllm
    let heads_per_gpu = model.kv_heads / gpus
    let spare_batch = max_batch - batch
    let pages = engine.num_blocks

}
"""


class Session:
    """A server process and a client on an event loop of their own thread."""

    def __init__(self, cwd: Path):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = LanguageClient("kvdsl-tests", "1")
        self.diagnostics: dict = {}  # uri -> every list published, in order
        self.changed = threading.Condition()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(ls, params):
            with self.changed:
                self.diagnostics.setdefault(params.uri, []).append(params.diagnostics)
                self.changed.notify_all()

        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.run(self.client.start_io(sys.executable, "-m", "kvdsl", "lsp", cwd=str(cwd), env=env))
        self.run(self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=from_fs_path(str(cwd)))))
        self.versions: dict = {}
        self.call(self.client.initialized, types.InitializedParams())

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(WAIT)

    def call(self, fn, *args):
        """Send a notification on the client's loop."""
        async def send():
            fn(*args)
        self.run(send())

    def open(self, path: Path, text: str = None) -> str:
        uri = from_fs_path(str(path))
        self.versions[uri] = 1
        self.call(self.client.text_document_did_open, types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, "kvspec", 1, path.read_text() if text is None else text)))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.call(self.client.text_document_did_change, types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            [types.TextDocumentContentChangeWholeDocument(text)]))

    def wait_diagnostics(self, uri: str, count: int) -> list:
        """The `count`-th list of diagnostics published for `uri` (waiting for it)."""
        with self.changed:
            ok = self.changed.wait_for(lambda: len(self.diagnostics.get(uri, [])) >= count, WAIT)
        assert ok, f"no diagnostics #{count} for {uri}: {self.diagnostics}"
        return list(self.diagnostics[uri][count - 1])

    def hover(self, uri, line, character):
        return self.run(self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))))

    def definition(self, uri, line, character):
        return self.run(self.client.text_document_definition_async(
            types.DefinitionParams(types.TextDocumentIdentifier(uri), types.Position(line, character))))

    def complete(self, uri, line, character):
        return self.run(self.client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(line, character))))

    def symbols(self, uri):
        return self.run(self.client.text_document_document_symbol_async(
            types.DocumentSymbolParams(types.TextDocumentIdentifier(uri))))

    def formatting(self, uri):
        return self.run(self.client.text_document_formatting_async(
            types.DocumentFormattingParams(types.TextDocumentIdentifier(uri), types.FormattingOptions(4, True))))

    def close(self):
        try:
            self.run(self.client.shutdown_async(None))
            self.call(self.client.exit, None)
            self.run(asyncio.sleep(0.2))
            self.run(self.client.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A catalog-like tree: a model, a hardware and a deployment that reads the model's cells."""
    root = tmp_path_factory.mktemp("lsp").resolve()
    for folder, name in (("models", "llama_3_1_70b"), ("hardware", "h100_sxm")):
        (root / folder).mkdir()
        shutil.copy(SPECS / folder / f"{name}.kvspec", root / folder / f"{name}.kvspec")
    (root / "deployments").mkdir()
    (root / "deployments" / "llama.kvspec").write_text(DEPLOYMENT)
    return root


@pytest.fixture(scope="module")
def session(workspace):
    started = Session(workspace)
    yield started
    started.close()


@pytest.fixture(scope="module")
def deployment(session, workspace):
    """The deployment, open, with its first diagnostics (none) received."""
    path = workspace / "deployments" / "llama.kvspec"
    uri = session.open(path)
    assert session.wait_diagnostics(uri, 1) == []
    return path, uri


def _position(text: str, needle: str, offset: int = 0) -> tuple:
    """(line, character) of the `offset`-th character of the first `needle` in text."""
    before = text[: text.index(needle) + offset]
    return before.count("\n"), len(before) - (before.rfind("\n") + 1)


def _check_error(path: Path, cwd: Path) -> tuple:
    """(line, column, message, hint) of the error `kvdsl check` reports for a file."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = cli("check", path.relative_to(cwd), code=1)
    finally:
        os.chdir(here)
    found = re.search(r":(\d+):(\d+): error: (.*)", result.output)
    hint = re.search(r"^hint: (.*)$", result.output, re.M)
    return int(found.group(1)), int(found.group(2)), found.group(3), hint.group(1) if hint else None


def test_a_typo_is_reported_where_check_reports_it_with_its_hint(session, workspace):
    path = workspace / "deployments" / "typo.kvspec"
    path.write_text(DEPLOYMENT.replace("kv_dtype = fp8", "kv_dtyp = fp8"))
    line, column, message, hint = _check_error(path, workspace)
    uri = session.open(path)
    (found,) = session.wait_diagnostics(uri, 1)
    assert (found.range.start.line, found.range.start.character) == (line - 1, column - 1)
    assert (found.range.end.line, found.range.end.character) == (line - 1, column - 1 + len("kv_dtyp"))
    assert found.message.startswith(message)
    assert "did you mean `kv_dtype`?" in hint and f"hint: {hint}" in found.message
    assert found.severity == types.DiagnosticSeverity.Error

    session.change(uri, DEPLOYMENT)  # the unsaved buffer, not the file on disk, is what counts
    assert session.wait_diagnostics(uri, 2) == []
    session.change(uri, DEPLOYMENT.replace("gpus = 4", "gpus = 4\n    gpu = 2"))
    (again,) = session.wait_diagnostics(uri, 3)
    assert again.range.start.line == DEPLOYMENT[: DEPLOYMENT.index("gpus = 4")].count("\n") + 1 and "`gpu`" in again.message


def test_errors_in_an_imported_file_are_published_for_that_file(session, workspace):
    (workspace / "broken").mkdir()
    model = workspace / "broken" / "model.kvspec"
    model.write_text((workspace / "models" / "llama_3_1_70b.kvspec").read_text().replace("kv_heads = 8", "kv_heads = 8 bytez"))
    main = workspace / "broken" / "main.kvspec"
    main.write_text('import "model.kvspec"\n')
    line, column, message, _ = _check_error(main, workspace)
    session.open(main)
    (found,) = session.wait_diagnostics(from_fs_path(str(model)), 1)
    assert (found.range.start.line, found.range.start.character) == (line - 1, column - 1)
    assert found.message.startswith(message)


@functools.lru_cache(maxsize=None)
def _eval_output(path: Path) -> str:
    return cli("eval", path, code=0).output


def _eval_value(path: Path, block: str, cell: str) -> str:
    output = _eval_output(path)
    section = output[output.index(f"deployment {block} "):]
    value = re.search(rf"^  {re.escape(cell)} +(.+)$", section, re.M).group(1)
    return re.split(r"\s{2,}", value)[0]  # the value, without the label eval prints after it


def test_hover_on_max_batch_gives_the_value_eval_prints(session, deployment):
    path, uri = deployment
    expected = _eval_value(path, "llama_70b_h100x4", "max_batch")
    reply = session.hover(uri, *_position(DEPLOYMENT, "max_batch - batch", 3))
    text = reply.contents.value
    assert f"**max_batch** = `{expected}`" in text
    assert "max_batch = if engine_runs_tensor_parallel and engine_runs_parallel_layout then min(memory_max_batch, engine_max_batch_size)" in text  # its rule
    assert "kvdsl/prelude/engines.kvspec" in text and "prelude defaults" in text


def test_engine_x_is_the_chosen_engine_s_cell(session, deployment):
    path, uri = deployment
    expected = _eval_value(path, "llama_70b_h100x4", "vllm.num_blocks")
    where = _position(DEPLOYMENT, "engine.num_blocks", 8)
    assert session.hover(uri, *where).contents.value.startswith(f"**vllm.num_blocks** = `{expected}`")
    found = session.definition(uri, *where)
    assert found.uri.endswith("/kvdsl/prelude/engine_vllm.kvspec") and _line_at(found) == "num_blocks"
    chooser = session.definition(uri, *_position(DEPLOYMENT, "engine.num_blocks", 2))
    assert chooser.uri == uri and _line_at(chooser) == "engine"


def test_hover_on_a_deployment_name_gives_its_verdict(session, deployment):
    path, uri = deployment
    reply = session.hover(uri, *_position(DEPLOYMENT, "llama_70b_h100x4", 2))
    verdict = re.search(r"^  => (fits.*)$", _eval_output(path), re.M).group(1)
    assert verdict in reply.contents.value


def test_hover_on_a_cell_of_another_file_says_where_it_is_defined(session, deployment):
    _, uri = deployment
    text = session.hover(uri, *_position(DEPLOYMENT, "model.kv_heads", 8)).contents.value
    assert text.startswith("**kv_heads** = `8`  (model `llama_3_1_70b`)")
    assert "defined in this block at `models/llama_3_1_70b.kvspec:" in text  # the server runs in the workspace


def test_hover_says_when_a_cell_comes_from_the_block_a_model_extends(session, workspace):
    text = DEPLOYMENT.replace('import "../hardware', 'import "half.kvspec"\nimport "../hardware').replace(
        "model = llama_3_1_70b", "model = half_70b")
    (workspace / "deployments" / "half.kvspec").write_text(
        'import "../models/llama_3_1_70b.kvspec"\n\nmodel half_70b "Half" extends llama_3_1_70b {\n    layers = 40\n}\n')
    path = workspace / "deployments" / "extends.kvspec"
    path.write_text(text)
    uri = session.open(path)
    assert session.wait_diagnostics(uri, 1) == []
    hover = session.hover(uri, *_position(text, "model.kv_heads", 8)).contents.value
    assert hover.startswith("**kv_heads** = `8`  (model `half_70b`)")
    assert "inherited from `llama_3_1_70b` (extends) at `models/llama_3_1_70b.kvspec:" in hover


def _line_at(location: types.Location) -> str:
    path = Path(to_fs_path(location.uri))
    lines = path.read_text().split("\n")
    start, end = location.range.start, location.range.end
    assert start.line == end.line
    return lines[start.line][start.character:end.character]


def test_definition_of_a_cell_in_another_file(session, deployment, workspace):
    _, uri = deployment
    found = session.definition(uri, *_position(DEPLOYMENT, "model.kv_heads", 8))
    assert Path(to_fs_path(found.uri)) == workspace / "models" / "llama_3_1_70b.kvspec"
    assert _line_at(found) == "kv_heads"
    # `model` in `model.kv_heads` is the deployment's own `model` cell
    own = session.definition(uri, *_position(DEPLOYMENT, "model.kv_heads", 2))
    assert own.uri == uri and own.range.start.line == DEPLOYMENT[: DEPLOYMENT.index("model = llama")].count("\n")


def test_definition_of_a_prelude_cell_a_block_and_an_import(session, deployment, workspace):
    _, uri = deployment
    found = session.definition(uri, *_position(DEPLOYMENT, "max_batch - batch", 1))
    path = Path(to_fs_path(found.uri))
    assert path.parent.name == "prelude" and path.name == "engines.kvspec" and path.parent.parent.name == "kvdsl"
    line = path.read_text().split("\n")[found.range.start.line]
    assert line.strip().startswith("max_batch = ")
    hardware = session.definition(uri, *_position(DEPLOYMENT, "= h100_sxm", 4))
    assert hardware.uri.endswith("hardware/h100_sxm.kvspec") and _line_at(hardware) == "h100_sxm"
    fp8 = session.definition(uri, *_position(DEPLOYMENT, "= fp8", 3))
    assert Path(to_fs_path(fp8.uri)).name == "formats.kvspec" and _line_at(fp8) == "fp8"
    assert session.hover(uri, *_position(DEPLOYMENT, "models/llama", 3)).contents.value == \
        "import `models/llama_3_1_70b.kvspec`: model `llama_3_1_70b`"
    imported = session.definition(uri, *_position(DEPLOYMENT, "models/llama", 3))
    assert Path(to_fs_path(imported.uri)) == workspace / "models" / "llama_3_1_70b.kvspec"


def test_completion_in_a_deployment_offers_its_cells_with_descriptions(session, deployment):
    _, uri = deployment
    line = DEPLOYMENT.split("\n").index("", 5)  # the blank line inside the block
    items = {i.label: i for i in session.complete(uri, line, 0).items}
    assert {"gpus", "context", "kv_dtype", "max_batch", "utilization"} <= set(items)
    assert "layers" not in items  # a model's cell, not a deployment's
    assert items["utilization"].documentation.startswith("GPU memory used: the share of each GPU's memory")  # its label
    assert items["gpus"].kind == types.CompletionItemKind.Field


def test_completion_of_values_and_units(session, deployment):
    _, uri = deployment
    values = {i.label: i for i in session.complete(uri, *_position(DEPLOYMENT, "= fp8", 2)).items}
    assert {"fp8", "q4_0", "bf16"} <= set(values) and values["q4_0"].kind == types.CompletionItemKind.EnumMember
    assert {"vllm", "sglang"} <= set(values) and "llama_3_1_70b" in values and "h100_sxm" in values
    formats_first = sorted(values.values(), key=lambda i: i.sort_text)[:5]
    assert all(i.kind == types.CompletionItemKind.EnumMember for i in formats_first)  # kv_dtype names a format
    members = {i.label for i in session.complete(uri, *_position(DEPLOYMENT, "model.kv_heads", 6)).items}
    assert {"kv_heads", "layers", "head_dim"} <= members and "gpus" not in members


def test_completion_of_units_after_a_number(session, workspace):
    text = DEPLOYMENT.replace("batch = 24", "batch = 24\n    reserve_bytes = 2 G")
    uri = session.open(workspace / "deployments" / "units.kvspec", text)
    units = {i.label: i for i in session.complete(uri, *_position(text, "2 G", 3)).items}
    assert {"GiB", "GB", "MiB", "tokens"} <= set(units) and units["GiB"].kind == types.CompletionItemKind.Unit
    assert "gpus" not in units


def test_document_symbols_list_blocks_and_their_cells(session, deployment):
    _, uri = deployment
    symbols = session.symbols(uri)
    blocks = [s for s in symbols if s.kind == types.SymbolKind.Struct]
    assert [b.name for b in blocks] == ["llama_70b_h100x4"]
    cells = [c.name for c in blocks[0].children]
    assert cells == ["model", "hardware", "gpus", "kv_dtype", "context", "batch", "engine", "heads_per_gpu",
                     "spare_batch", "pages"]
    assert [s.name for s in symbols if s.kind == types.SymbolKind.File] == ["../models/llama_3_1_70b.kvspec",
                                                                          "../hardware/h100_sxm.kvspec"]


def test_formatting_returns_the_formatter_s_text(session, workspace):
    fmt = pytest.importorskip("kvdsl.fmt")
    path = workspace / "deployments" / "messy.kvspec"
    messy = DEPLOYMENT.replace("gpus = 4", "gpus=4").replace("batch = 24", "batch   =   24")
    path.write_text(messy)
    uri = session.open(path)
    edits = session.formatting(uri)
    expected = fmt.format_text(messy)
    assert expected != messy and len(edits) == 1 and edits[0].new_text == expected
    assert (edits[0].range.start.line, edits[0].range.start.character) == (0, 0)


def test_formatting_or_completing_a_document_not_open_reads_no_file(session, workspace):
    fifo = workspace / "never_opened.kvspec"
    os.mkfifo(fifo)  # reading it would block the server for good
    for path in (fifo, workspace / "missing.kvspec"):
        assert not session.formatting(from_fs_path(str(path)))
        assert not session.complete(from_fs_path(str(path)), 0, 0).items
    uri = session.open(workspace / "models" / "llama_3_1_70b.kvspec")
    assert session.symbols(uri)  # and it still answers


def test_an_unsaved_change_to_an_imported_file_reaches_the_files_that_import_it(session, workspace):
    import time

    folder = workspace / "edited"
    (folder / "models").mkdir(parents=True)
    (folder / "hardware").mkdir()
    model = folder / "models" / "llama_3_1_70b.kvspec"
    shutil.copy(workspace / "models" / "llama_3_1_70b.kvspec", model)
    shutil.copy(workspace / "hardware" / "h100_sxm.kvspec", folder / "hardware")
    (folder / "deployments").mkdir()
    path = folder / "deployments" / "llama.kvspec"
    path.write_text(DEPLOYMENT)
    uri = session.open(path)
    session.wait_diagnostics(uri, 1)
    where = _position(DEPLOYMENT, "model.kv_heads", 8)
    assert session.hover(uri, *where).contents.value.startswith("**kv_heads** = `8`")
    model_uri = session.open(model)
    session.change(model_uri, model.read_text().replace("kv_heads = 8 ", "kv_heads = 16 "))
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:  # the deployment is analysed again after the model
        text = session.hover(uri, *where).contents.value
        if not text.startswith("**kv_heads** = `8`"):
            break
        time.sleep(0.2)
    assert text.startswith("**kv_heads** = `16`"), text
    assert "kv_heads = 8 " in model.read_text()  # nothing was written


def test_positions_count_the_client_s_code_units():
    from kvdsl.lsp import char_column, client_column

    line = 'model m "\U0001F680 rocket" {'
    assert client_column(line, 12) == 12  # past the rocket: one character, two UTF-16 units
    assert char_column(line, 12) == 12 and char_column(line, 9) == 10
    assert client_column(line, 9) == 8 and client_column("ab", 5) == 4
    assert client_column(line, 12, "utf-8") == 14 and char_column(line, 14, "utf-8") == 12
    assert client_column(line, 12, "utf-32") == 11 and char_column(line, 11, "utf-32") == 12


def test_eval_does_not_import_the_language_server():
    import subprocess

    spec = SPECS / "deployments" / "llama_3_1_70b_h100x4_fp8.kvspec"
    code = ("import sys; from kvdsl.cli import main\n"
            "main(['eval', sys.argv[1]], standalone_mode=False)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'sympy')))")
    out = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True, text=True, cwd=ROOT, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.strip().endswith("[]"), out.stdout[-500:]


def test_without_pygls_the_command_says_what_to_install():
    import subprocess

    code = "import sys; sys.modules['pygls'] = None\nfrom kvdsl.cli import main\nmain(['lsp'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "error: `kvdsl lsp` needs pygls, which is not installed\nhint: pip install 'kvdsl[lsp]'\n"


def test_an_analysis_leaves_no_reference_cycles_for_the_frozen_collector_to_keep():
    """The server freezes what an analysis leaves (`gc.freeze()`): a cycle in it would be kept for good."""
    import gc

    from kvdsl import lsp_analysis

    path = SPECS / "deployments" / "gpt_oss_120b_h100.kvspec"
    text = path.read_text() + "\n# an edit\n"
    gc.collect()
    gc.disable()
    try:
        lsp_analysis.analyze(path, text, {path: text})  # the resolver and the function table made cycles
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("kvdsl")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
