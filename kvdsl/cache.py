"""Parsed spec files kept on disk between runs, so a command does not parse the prelude every time.

An entry is keyed by the file's text, the path messages show for it, and the
code that parses (grammar, transformer, spec model): any change to one of them
is a different key, so an entry is never stale.  Entries live in
`$KVDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/kvdsl`, else `~/.cache/kvdsl`;
`KVDSL_NO_CACHE=1` turns the cache off.  Every failure to read or write it is
silent: the file is then simply parsed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

PARSING_CODE = ("kvspec.lark", "parser.py", "transformer.py", "transformer_expr.py", "transformer_chains.py", "model.py",
                "units.py", "errors.py", "words.py")
MAX_ENTRIES = 2000


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
        fd, tmp = tempfile.mkstemp(prefix=".entry.", dir=entry.parent)
        try:
            with os.fdopen(fd, "wb") as stream:
                pickle.dump(parsed, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _prune(entry.parent)
    except Exception:  # a full disk, a read-only home, an object that does not pickle
        return


def _prune(folder: Path) -> None:
    entries = list(folder.glob("*.pickle"))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for old in entries[: len(entries) - MAX_ENTRIES // 2]:
        with contextlib.suppress(OSError):
            old.unlink()
