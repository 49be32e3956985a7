"""Writing files atomically, never over a user's file unless asked."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import UsageError


@contextlib.contextmanager
def atomic_writer(path, force: bool = False, binary: bool = False):
    """Yield a temporary file next to `path`; rename it into place on success."""
    target = Path(path)
    if target.exists() and not force:
        raise UsageError(f"`{path}` exists: pass --force to overwrite it")
    if not target.parent.is_dir():
        raise UsageError(f"cannot write `{path}`: no directory `{target.parent}`")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as stream:
            yield stream
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
