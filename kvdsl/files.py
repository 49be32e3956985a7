"""Writing files atomically, never over a user's file unless asked."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import UsageError


def check_writable(target: Path, force: bool) -> None:
    """Refuse before any work: an existing file without --force, or anything but a regular file."""
    try:
        exists = target.exists() or target.is_symlink()
        if exists and (target.is_symlink() or not target.is_file()):
            raise UsageError(f"`{target}` exists and is not a regular file: choose another name")
        if exists and not force:
            raise UsageError(f"`{target}` exists: pass --force to overwrite it")
        if not target.parent.is_dir():
            raise UsageError(f"cannot write `{target}`: no directory `{target.parent}`")
    except OSError as exc:
        raise UsageError(f"cannot write `{target}`: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_writer(path, force: bool = False, binary: bool = False):
    """Yield a temporary file next to `path`; rename it into place on success."""
    target = Path(path)
    check_writable(target, force)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise UsageError(f"cannot write `{path}`: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as stream:
            yield stream
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise UsageError(f"cannot write `{path}`: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
