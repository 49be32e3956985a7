"""A progress line on stderr for a command that takes more than a moment, when stderr is a terminal.

A command runs `with reporting("export"):`; the library says what it is
doing with `stage("resolving 16,159 cells")` (nothing happens when no
command reports, or stderr is not a terminal: a pipe, a file, a test).  After
DELAY seconds a line such as `export: resolving 16,159 cells (3 s)` appears
on stderr and is kept current; it is erased before the command prints its
answer (`done()`) and when the command ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

DELAY = 2.0  # seconds before the line appears: a quick command shows nothing
TICK = 0.25


class _Line:
    def __init__(self, command: str, stream, delay: float):
        self.command, self.stream, self.delay = command, stream, delay
        self.text, self.started, self.shown = "starting", time.monotonic(), 0
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True, name="kvdsl-progress").start()

    def _run(self):
        while True:
            elapsed = time.monotonic() - self.started
            if elapsed >= self.delay:
                self._draw(f"{self.command}: {self.text} ({elapsed:.0f} s)")
            if self.stopped.wait(TICK):
                return

    def _draw(self, line: str):
        with self.lock:
            if self.stopped.is_set():
                return
            width = max(self.shown, len(line))
            self.stream.write("\r" + line.ljust(width) + "\r")
            self.stream.flush()
            self.shown = len(line)

    def stop(self):
        with self.lock:
            self.stopped.set()
            if self.shown:
                self.stream.write("\r" + " " * self.shown + "\r")
                self.stream.flush()
                self.shown = 0


_current: "_Line | None" = None


@contextlib.contextmanager
def reporting(command: str):
    """Show the progress of `command` on stderr while the block runs, if stderr is a terminal."""
    global _current
    stream = sys.stderr
    if _current is not None or not _is_terminal(stream):
        yield
        return
    _current = _Line(command, stream, float(os.environ.get("KVDSL_PROGRESS_DELAY", DELAY)))
    try:
        yield
    finally:
        _current.stop()
        _current = None


def stage(text: str) -> None:
    """What the running command is doing now (shown on its progress line, if it has one)."""
    if _current is not None:
        _current.text = text


def done() -> None:
    """Erase the progress line for good: the command prints its answer next."""
    if _current is not None:
        _current.stop()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
