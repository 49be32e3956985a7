"""Parsed spec files and built programs kept on disk between runs, so a
command does not parse the prelude, or resolve the same specs, every time.

A parsed file is keyed by its text, the path messages show for it, and the
code that parses (grammar, transformer, spec model): any change to one of them
is a different key, so an entry is never stale.

A program is keyed by the question (the paths given, the working directory)
and by every file of kvdsl's code and the names of its prelude files; its
entry begins with a header naming every file the build read and the digest of
their texts (`Workspace.sources`, `fingerprint`), and is used only when the
files read now give the same digest.  A program is kept the second time the
same files are built, so specs built once (a test's, an editor's buffer) cost
no more than before.

Entries live in `$KVDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/kvdsl`, else
`~/.cache/kvdsl`; `KVDSL_NO_CACHE=1` turns the cache off.  Every failure to
read or write it is silent: the file is then simply parsed, or the program built.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import pickle
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

PARSING_CODE = ("kvspec.lark", "parser.py", "transformer.py", "transformer_expr.py", "transformer_chains.py", "model.py",
                "units.py", "errors.py", "words.py")
MAX_ENTRIES = 2000
PROGRAM_ENTRIES = 24  # a catalog's program takes about 10 MB


@lru_cache(maxsize=1)
def _code_fingerprint() -> bytes:
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in PARSING_CODE:
        digest.update(name.encode() + b"\0" + (here / name).read_bytes())
    return digest.digest()


@lru_cache(maxsize=1)
def directory() -> Optional[Path]:
    """The cache directory, created private to this user; None when off or unusable."""
    if os.environ.get("KVDSL_NO_CACHE"):
        return None
    base = os.environ.get("KVDSL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kvdsl")
    path = Path(base)
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        # hazard: entries are unpickled, so only a directory this user owns is trusted
        if hasattr(os, "getuid") and path.stat().st_uid != os.getuid():
            return None
    except OSError:
        return None
    return path


def _entry(text: str, shown: str) -> Optional[Path]:
    folder = directory()
    if folder is None:
        return None
    digest = hashlib.sha256(_code_fingerprint() + shown.encode("utf-8", "surrogatepass") + b"\0" + text.encode("utf-8", "surrogatepass"))
    return folder / f"{digest.hexdigest()}.pickle"


def load(text: str, shown: str):
    """The parsed file stored for this text and path, or None."""
    try:
        entry = _entry(text, shown)
        if entry is None or not entry.is_file():
            return None
        with entry.open("rb") as stream:
            return pickle.load(stream)
    except Exception:  # a truncated or foreign entry: parse instead
        return None


def store(text: str, shown: str, parsed) -> None:
    """Keep a parsed file for the next run (atomically; never an error)."""
    try:
        entry = _entry(text, shown)
        if entry is None or entry.exists():
            return
        _write(entry, parsed)
        _prune(entry.parent, ".pickle", MAX_ENTRIES)
    except Exception:  # a full disk, a read-only home, an object that does not pickle
        return


def _write(entry: Path, *objects) -> None:
    """Pickle `objects` one after the other into `entry`, atomically."""
    fd, tmp = tempfile.mkstemp(prefix=".entry.", dir=entry.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            for obj in objects:
                pickle.dump(obj, stream, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, entry)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _prune(folder: Path, suffix: str, kept: int) -> None:
    entries = list(folder.glob("*" + suffix))
    if len(entries) <= kept:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for old in entries[: len(entries) - kept // 2]:
        with contextlib.suppress(OSError):
            old.unlink()


# ---- built programs ----------------------------------------------------------------


@lru_cache(maxsize=1)
def _package_fingerprint() -> bytes:
    """Every file of kvdsl's code, the names of its prelude files and the Python that runs them."""
    here = Path(__file__).parent
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted([*here.rglob("*.py"), here / "kvspec.lark"]):
        digest.update(str(path.relative_to(here)).encode() + b"\0" + path.read_bytes())
    digest.update("\0".join(sorted(p.name for p in (here / "prelude").glob("*.kvspec"))).encode())
    return digest.digest()


def _program_entry(question: str, suffix: str) -> Optional[Path]:
    folder = directory()
    if folder is None:
        return None
    folder = folder / "programs"
    folder.mkdir(exist_ok=True, mode=0o700)
    digest = hashlib.sha256(_package_fingerprint() + question.encode("utf-8", "surrogatepass"))
    return folder / f"{digest.hexdigest()}{suffix}"


def load_program(question: str, current):
    """(header, program or None) stored for `question`, or None.

    `current(header)` says whether the header still describes the files (it
    reads them): an entry whose header it refuses is not read further.  The
    program is None when only the header was kept (the first build).
    """
    try:
        for suffix in (".pickle", ".seen"):  # a program kept earlier may be stale while its files' new header is seen
            entry = _program_entry(question, suffix)
            if entry is None or not entry.is_file():
                continue
            with entry.open("rb") as stream:
                header = pickle.load(stream)
                if not current(header):
                    continue
                return header, (_load_frozen(stream) if suffix == ".pickle" else None)
    except Exception:  # a truncated or foreign entry: build instead
        return None
    return None


def _load_frozen(stream):
    """The next object of `stream`, out of the garbage collector's way."""
    enabled = gc.isenabled()
    gc.disable()  # hazard: a program is a million small objects; collecting while they arrive costs more than reading them
    try:
        found = pickle.load(stream)
        gc.freeze()  # long-lived: never scanned again (what is dropped is still freed by reference counting)
    finally:
        if enabled:
            gc.enable()
    return found


def store_program(question: str, header: dict, program=None) -> None:
    """Keep the program for `question` with its header, or (program None) the header alone; atomically, never an error."""
    try:
        entry = _program_entry(question, ".pickle" if program is not None else ".seen")
        if entry is None:
            return
        _write(entry, header, *([program] if program is not None else []))
        _prune(entry.parent, entry.suffix, PROGRAM_ENTRIES if program is not None else MAX_ENTRIES)
    except Exception:  # a full disk, a read-only home, a program too deep to pickle
        return
