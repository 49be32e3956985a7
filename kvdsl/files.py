"""Writing files atomically, never over a user's file unless asked."""

from __future__ import annotations

import contextlib
import os
import re
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


TERMINATING = ("SIGTERM", "SIGHUP")  # signals that end a run but, by default, skip its cleanup
STALE_SECONDS = 24 * 3600  # a temporary file of no known process, older than this, is left over


@contextlib.contextmanager
def atomic_writer(path, force: bool = False, binary: bool = False):
    """Yield a temporary file next to `path`; rename it into place on success.

    The temporary file, `.NAME.PID.XXXX.tmp`, is removed on any error, on
    Ctrl-C and on SIGTERM or SIGHUP.  One left by a killed run (SIGKILL, a
    power cut) is removed by the next write of the same file.
    """
    target = Path(path)
    check_writable(target, force)
    remove_stale(target)
    with _terminating_signals_raise():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
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


def remove_stale(target: Path) -> None:
    """Remove temporary files of `target` that no running process is writing."""
    pattern = re.compile(re.escape(f".{target.name}.") + r"(?:(\d+)\.)?[^.]+\.tmp")
    try:
        candidates = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return
    for candidate in candidates:
        pid = pattern.fullmatch(candidate.name).group(1)
        with contextlib.suppress(OSError):
            stale = not _running(int(pid)) if pid is not None else _age(candidate) > STALE_SECONDS
            if stale:
                candidate.unlink()


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process, or no pid at all
    return True


def _age(path: Path) -> float:
    import time

    return time.time() - path.lstat().st_mtime


@contextlib.contextmanager
def _terminating_signals_raise():
    """While a temporary file exists, SIGTERM and SIGHUP raise SystemExit so it is removed.

    hazard: Python's default for these signals ends the process at once,
    with no `finally` run; a handler someone else installed is left alone.
    """
    import signal
    import threading

    installed = {}
    if threading.current_thread() is threading.main_thread():
        for name in TERMINATING:
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) is signal.SIG_DFL:
                installed[number] = signal.signal(number, _exit_on_signal)
    try:
        yield
    finally:
        for number, previous in installed.items():
            signal.signal(number, previous)


def _exit_on_signal(number, frame):
    raise SystemExit(128 + number)
