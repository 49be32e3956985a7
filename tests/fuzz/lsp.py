"""The language server under fuzz: one `kvdsl lsp` process, fed malformed and hostile messages case after case.

A case is a burst of messages (`lsp_messages`): bodies that are not JSON or
not JSON-RPC, requests at positions outside any document, documents that
import devices, FIFOs, directories and themselves, documents changed many
times without a pause.  After each burst the server must answer a plain
request about a document it holds; a case fails when it does not (a crash or a
hang), when the server writes a Python traceback, or when it holds more than
MAX_RSS of memory.  A hang is measured in the server's CPU seconds (a busy
machine slows the answer, not the verdict), or five times as many wall seconds
while it uses no CPU.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import mutators as m

MAX_RSS = 1536 * 2**20  # bytes of memory the server may hold after any case
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Server:
    """A `python -m kvdsl lsp` process and a minimal JSON-RPC client over its stdio."""

    def __init__(self, root: Path):
        self.root = root
        self.log = open(root / "lsp-stderr.log", "w+b")
        env = dict(os.environ, KVDSL_CACHE_DIR=str(root / "lsp-cache"))
        self.process = subprocess.Popen([sys.executable, "-m", "kvdsl", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, cwd=root, env=env)
        self.answers: "queue.Queue" = queue.Queue()
        self.next_id = 1000
        self.logged = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"processId": os.getpid(), "rootUri": (root / "specs").as_uri(), "capabilities": {}})
        self.notify("initialized", {})
        self.probe_uri = (root / "specs" / "deployments" / "mistral_7b_l4.kvspec").as_uri()
        text = (root / "specs" / "deployments" / "mistral_7b_l4.kvspec").read_text(encoding="utf-8")
        self.notify("textDocument/didOpen", {"textDocument": {"uri": self.probe_uri, "languageId": "kvspec", "version": 1, "text": text}})

    # -- the wire --
    def _read(self):
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = stream.read(length or 0)
            try:
                message = json.loads(body)
            except ValueError:
                continue
            if isinstance(message, dict) and "id" in message and "method" not in message:
                self.answers.put(message)

    def send_raw(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message) -> None:
        body = json.dumps(message).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params, wait: float | None = 60.0):
        self.next_id += 1
        ident = self.next_id
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return self.wait_for(ident, wait) if wait else None

    def wait_for(self, ident: int, wall: float):
        """The answer to request `ident`, or None after `wall` seconds."""
        deadline = time.monotonic() + wall
        while time.monotonic() < deadline:
            try:
                answer = self.answers.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    return None
                continue
            if answer.get("id") == ident:
                return answer
        return None

    # -- what the process does --
    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss(self) -> int:
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def new_log(self) -> str:
        self.log.flush()
        self.log.seek(self.logged)
        text = self.log.read().decode("utf-8", "replace")
        self.logged += len(text.encode("utf-8", "replace"))
        self.log.seek(0, 2)
        return text

    def close(self) -> None:
        try:
            self.request("shutdown", None, wait=10)
            self.notify("exit", None)
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.process.kill()
            self.process.wait()
        if self.process.poll() is None:  # it did not answer the shutdown
            self.process.kill()
            self.process.wait()
        self.log.close()


# ---- the cases ---
# Every message keeps the stream's framing (each ends where the next header can start): a client that
# breaks the framing loses every message after it, with any server.-------------------------------------------------------------------------------

def _position(rng: random.Random) -> dict:
    line = rng.choice([0, 1, 5, 12, -1, 10**6, 2**31, 2**53, "3", None, 1.5])
    character = rng.choice([0, 4, 13, 40, -5, 10**6, 2**31, "x", None])
    return {"line": line, "character": character}


def _range(rng: random.Random) -> dict:
    return {"start": _position(rng), "end": _position(rng)}


MALFORMED = [b"Content-Length: 5\r\n\r\n{bad}", b"Content-Length: abc\r\n\r\n", b"Content-Length: -1\r\n\r\n",
             b"\r\n", b"Content-Type: text/plain\r\n\r\n", b"Content-Length: 2\r\n\r\n\xff\xfe",
             b"Content-Length: 4\r\n\r\nnull", b"Content-Length: 6\r\n\r\n[1, 2]", b"Content-Length: 3\r\n\r\n\"x\"",
             b"content-length: 2\r\n\r\n{}\r\n", b"Content-Length: 2\r\nX-Odd: \x00\r\n\r\n{}"]


def _malformed(rng: random.Random, server_uri: str) -> list:
    """Messages a client should never send."""
    shapes = [
        {"jsonrpc": "2.0", "id": {"nested": 1}, "method": "textDocument/hover", "params": {}},
        {"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 8, "method": "textDocument/hover"},
        {"jsonrpc": "2.0", "id": 9, "method": "no/such/method", "params": {}},
        {"jsonrpc": "1.0", "method": "textDocument/didOpen", "params": {"textDocument": None}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": server_uri + "x", "version": 2},
                                                                          "contentChanges": [{"text": "x"}]}},
        {"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": "untitled:never-opened"}}},
        {"jsonrpc": "2.0", "id": 10, "method": "textDocument/definition",
         "params": {"textDocument": {"uri": 12}, "position": {"line": 0, "character": 0}}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen",
         "params": {"textDocument": {"uri": "file:///", "languageId": "kvspec", "version": 1, "text": None}}},
        {"jsonrpc": "2.0", "id": 11, "result": {"unasked": True}},
        {"method": "exit-not-really", "params": {}},
    ]
    out = []
    for _ in range(rng.randint(1, 4)):
        out.append(("raw", rng.choice(MALFORMED)) if rng.random() < 0.5 else ("json", rng.choice(shapes)))
    out.append(("raw", b"Content-Length: %d\r\n\r\n" % 20000 + bytes(rng.randrange(256) for _ in range(20000))))
    return out


def _document_text(rng: random.Random, texts: dict, root: Path) -> str:
    """A spec as an editor would hold it: a real one, mutated, or importing what is not a spec file."""
    kind = rng.random()
    text = rng.choice(list(texts.values()))
    if kind < 0.5:
        for _ in range(rng.randint(1, 3)):
            text, _ = m.mutate_text(rng, text)
        return text
    if kind < 0.8:
        target = rng.choice(["/dev/zero", "/dev/urandom", "/dev/stdin", "/dev/null", "/proc/self/fd/0", str(root / "fifo"),
                             str(root / "specs"), "lsp_case.kvspec", str(root / "loop"), "/nonexistent/x.kvspec",
                             "x" * 5000, "catalog:hardware/nope.kvspec"])
        return f'import "{target}"\n' + text
    return m.repetition_spec(rng)


def lsp_messages(rng: random.Random, texts: dict, root: Path, probe_uri: str, index: int) -> tuple[str, list]:
    """Case `index`: a description and the messages to send (("json", message) or ("raw", bytes))."""
    kind = rng.choice(["malformed", "positions", "document", "document", "edits"])
    if kind == "malformed":
        return "malformed messages", _malformed(rng, probe_uri)
    uri = rng.choice([(root / "specs" / "deployments" / f"lsp_case_{index}.kvspec").as_uri(), probe_uri,
                      "untitled:Untitled-1", (root / "specs" / "models" / f"lsp_case_{index}.kvspec").as_uri(),
                      "file:///dev/zero", (root / "fifo").as_uri()])
    messages = []
    if kind != "positions":
        messages.append(("json", {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "kvspec", "version": 1, "text": _document_text(rng, texts, root)}}}))
    if kind == "edits":
        for version in range(2, rng.randint(3, 30)):
            if rng.random() < 0.7:
                change = {"text": _document_text(rng, texts, root)}
            else:
                change = {"range": _range(rng), "text": rng.choice(m.TOKENS + ["\n", "", "x" * 1000])}
            messages.append(("json", {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}}))
    for _ in range(rng.randint(1, 5)):
        method = rng.choice(["textDocument/hover", "textDocument/definition", "textDocument/completion",
                             "textDocument/documentSymbol", "textDocument/formatting"])
        params = {"textDocument": {"uri": uri}}
        if method == "textDocument/formatting":
            params["options"] = {"tabSize": rng.choice([4, 0, -1, 10**9]), "insertSpaces": rng.choice([True, False, "x"])}
        elif method != "textDocument/documentSymbol":
            params["position"] = _position(rng)
        messages.append(("json", {"jsonrpc": "2.0", "id": 500000 + len(messages), "method": method, "params": params}))
    if kind != "positions" and uri != probe_uri and rng.random() < 0.8:
        messages.append(("json", {"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}}))
    return f"{kind} on {uri.rsplit('/', 1)[-1]}", messages


def run_case(server: Server, messages: list, timeout: float) -> str | None:
    """Send one case's messages, then ask about the probe document: None if the server answers and stays well."""
    began = server.cpu_seconds()
    server.next_id += 1
    ident = server.next_id
    try:
        for form, message in messages:
            server.send_raw(message) if form == "raw" else server.send(message)
        server.send({"jsonrpc": "2.0", "id": ident, "method": "textDocument/documentSymbol",
                     "params": {"textDocument": {"uri": server.probe_uri}}})
    except OSError:  # the server closed its input: it ended
        server.process.wait()
        return f"the server ended (status {server.process.returncode})"
    deadline = time.monotonic() + 3 * timeout  # before the runner's own watchdog (five times)
    answer = None
    while answer is None:
        answer = server.wait_for(ident, 1.0)
        if server.process.poll() is not None:
            return f"the server ended (status {server.process.returncode})"
        if server.cpu_seconds() - began > timeout:
            return f"hang: more than {timeout:g} CPU seconds"
        if time.monotonic() > deadline:
            return f"hang: no answer in {3 * timeout:g} s"
    log = server.new_log()
    for traceback in log.split("Traceback (most recent call last)")[1:]:
        if "/kvdsl/" in traceback:  # pygls logs the messages it refuses with a traceback of its own: not kvdsl's
            return "traceback in the server's log: " + traceback[-600:]
    if "error" in answer:
        return f"the probe failed: {answer['error']}"[:300]
    rss = server.rss()
    if rss > MAX_RSS:
        return f"the server holds {rss / 2**20:,.0f} MiB"
    return None
