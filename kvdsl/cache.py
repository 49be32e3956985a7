"""Parsed spec files and built programs kept on disk between runs, so a
command does not parse the prelude, or resolve the same specs, every time.

A parsed file is keyed by its text, the path messages show for it, and the
code that parses (grammar, transformer, spec model): any change to one of them
is a different key, so an entry is never stale.

A program is keyed by its workspace's fingerprint (a digest of every file's
display path and text, `Workspace.fingerprint`) and by every file of
kvdsl's code and the names of its prelude files.  It is kept the second
time the same files are built (the first leaves a mark), so specs built
once (a test's, an editor's buffer) cost no more than before.  Beside it,
each question (the paths given, the working directory) keeps the files it
loaded last and their fingerprint, so a command finds its program by
reading those files, without parsing them.

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


def _program_entry(key: str, suffix: str) -> Optional[Path]:
    folder = directory()
    if folder is None:
        return None
    folder = folder / "programs"
    folder.mkdir(exist_ok=True, mode=0o700)
    digest = hashlib.sha256(_package_fingerprint() + key.encode("utf-8", "surrogatepass"))
    return folder / f"{digest.hexdigest()}{suffix}"


# set for a process's first command (`kvdsl/cli_common.py`), which builds one long-lived program: a
# program read back is then frozen out of the cycle collector's reach (its objects are still freed
# by their reference counts once unused); later commands in the same process (the fuzzer's, the
# tests') freeze nothing, or each would freeze the cycles left by those before it; a library's
# caller keeps the collector as it set it
freeze_loaded = False


def load_program(fingerprint: str):
    """The program kept for the workspace with this fingerprint, or None."""
    try:
        entry = _program_entry(fingerprint, ".pickle")
        if entry is None or not entry.is_file():
            return None
        with entry.open("rb") as stream:
            enabled = gc.isenabled()
            gc.disable()  # hazard: a program is a million small objects; collecting while they arrive costs more than reading them
            try:
                program = pickle.load(stream)
                if freeze_loaded:
                    gc.freeze()
            finally:
                if enabled:
                    gc.enable()
        return program
    except Exception:  # a truncated or foreign entry: build instead
        return None


def store_program(fingerprint: str, program) -> None:
    """Keep the program of the workspace with this fingerprint, atomically; never an error."""
    _store(fingerprint, ".pickle", program, PROGRAM_ENTRIES)


def seen(fingerprint: str) -> bool:
    """Was a program of this fingerprint built before (`mark_seen`)?"""
    try:
        entry = _program_entry(fingerprint, ".seen")
        return entry is not None and entry.is_file()
    except OSError:
        return False


def mark_seen(fingerprint: str) -> None:
    _store(fingerprint, ".seen", None, MAX_ENTRIES)


def load_where(question: str) -> Optional[dict]:
    """The header (`sources`, `leave_out`, `fingerprint`) of the files `question` loaded last, or None."""
    try:
        entry = _program_entry(question, ".where")
        if entry is None or not entry.is_file():
            return None
        with entry.open("rb") as stream:
            return pickle.load(stream)
    except Exception:
        return None


def store_where(question: str, header: dict) -> None:
    _store(question, ".where", header, MAX_ENTRIES)


def _store(key: str, suffix: str, obj, kept: int) -> None:
    try:
        entry = _program_entry(key, suffix)
        if entry is None:
            return
        _write(entry, obj)
        _prune(entry.parent, suffix, kept)
    except Exception:  # a full disk, a read-only home, a program too deep to pickle
        return
