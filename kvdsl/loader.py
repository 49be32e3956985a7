"""Files -> a workspace: the prelude, the given specs and everything they import."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import ImportFailure, KvdslError, Span, flatten, remember_source
from .model import Block, Defaults, FnDef, Import, SpecFile
from .parser import parse_cached, read_spec

PRELUDE = Path(__file__).with_name("prelude")
_OVERLAY: contextvars.ContextVar = contextvars.ContextVar("overlay", default={})


@contextlib.contextmanager
def overlaid(texts: dict):
    """Within the block, load reads these texts (resolved path -> text) instead of the files on disk.

    An editor's unsaved buffers are loaded this way.
    """
    token = _OVERLAY.set({Path(p).resolve(): t for p, t in texts.items()})
    try:
        yield
    finally:
        _OVERLAY.reset(token)


@dataclass
class Workspace:
    """Every block and `defaults` of a run, in load order, and the errors met loading."""

    blocks: list = field(default_factory=list)  # (Block, is_prelude)
    defaults: list = field(default_factory=list)  # (Defaults, is_prelude), prelude first
    functions: list = field(default_factory=list)  # (FnDef, is_prelude): every file's `fn`, visible to all
    files: list = field(default_factory=list)  # display paths, in load order
    errors: list = field(default_factory=list)
    # a digest of every file's display path and text, in load order: two
    # workspaces with the same one resolve to the same program
    fingerprint: str = ""
    # (path as reached, resolved path, display path, is_prelude) of each file read, in load order
    sources: list = field(default_factory=list)
    leave_out: tuple = ()  # kinds of blocks read from the given files only
    # display path -> (a digest of its text, True when it holds only blocks and imports, the file parsed)
    texts: dict = field(default_factory=dict)


CATALOG = "catalog:"  # `import "catalog:hardware/h200.kvspec"`: a spec of the catalog kvdsl ships


def catalog_root() -> Path:
    """Where the catalog's models and hardware are: `kvdsl/catalog/` of an installed package, which
    the build copies from `specs/`; in a clone (and an editable install), `specs/` itself."""
    installed = Path(__file__).with_name("catalog")
    return installed if installed.is_dir() else Path(__file__).resolve().parent.parent / "specs"


CATALOG_FOLDERS = {"model": "models", "hardware": "hardware"}  # the catalog's folder of each kind it ships


def catalog_names(kind: str) -> list[str]:
    """The blocks of `kind` the catalog ships (each file is named after its block)."""
    folder = CATALOG_FOLDERS.get(kind)
    return sorted(p.stem for p in (catalog_root() / folder).glob("*.kvspec")) if folder else []


def catalog_import(kind: str, name: str) -> str:
    """The import line that brings the catalog's block `name` of `kind`."""
    return f'import "{CATALOG}{CATALOG_FOLDERS[kind]}/{name}.kvspec"'


def spec_location(written: str, base: Path) -> Path:
    """The file an import (or a path given to a command) names: `catalog:...` in the catalog, else from `base`."""
    if written.startswith(CATALOG):
        return catalog_root() / written[len(CATALOG):]
    return base / written


def display_path(path: Path) -> str:
    """A path as messages show it: relative to the working directory when inside it.

    Prelude files always show as `kvdsl/prelude/NAME`, wherever kvdsl is
    installed; a catalog file outside the working directory as `catalog:KIND/NAME`.
    """
    if path.parent == PRELUDE.resolve():
        return f"kvdsl/prelude/{path.name}"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    if not rel.startswith(".."):
        return rel
    root = catalog_root().resolve()
    return CATALOG + path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _not_a_file(reached: Path, is_dir: bool, exists: bool, span) -> ImportFailure:
    """The error for a path that names no spec file, named as it was written (`/dev/stdin`, not `/proc/...`)."""
    try:
        exists = exists or reached.exists()  # a pipe behind /dev/stdin resolves to a name that does not exist
    except OSError:
        pass
    what = ("a directory, not a spec file" if is_dir else
            "not a regular file (a pipe, device or socket): a spec is read from a file" if exists else "not found")
    return ImportFailure(f"cannot read `{display_path(Path(reached))}`: {what}", span)


class _Loader:
    def __init__(self, leave_out: tuple = (), known: Optional[dict] = None):
        self.known = known or {}
        self.ws = Workspace()
        self.done: set[Path] = set()
        self.stack: list[Path] = []
        self.digest = _new_digest(leave_out)
        self.leave_out = self.ws.leave_out = leave_out

    def load(self, path: Path, prelude: bool, span: Span | None = None) -> None:
        overlay = _OVERLAY.get()
        reached = path
        try:
            path = path.resolve()
            is_file, is_dir, exists = path.is_file() or path in overlay, path.is_dir(), path.exists()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            self.ws.errors.append(ImportFailure(f"cannot read `{path}`: {getattr(exc, 'strerror', None) or exc}", span))
            return
        if path in self.stack:
            chain = " -> ".join(display_path(p) for p in self.stack[self.stack.index(path) :] + [path])
            self.ws.errors.append(ImportFailure(f"import cycle: {chain}", span))
            return
        if path in self.done:
            return
        self.done.add(path)
        shown = display_path(path)
        if not is_file:
            self.ws.errors.append(_not_a_file(reached, is_dir, exists, span))
            return
        try:
            text = overlay[path] if path in overlay else read_spec(path, shown)
            _digest(self.digest, shown, text, prelude)
            self.ws.sources.append((str(reached), str(path), shown, prelude))
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            known = self.known.get(shown)
            if known is not None and known[0] == digest:  # parsed for the program built before
                spec = known[2]
                remember_source(shown, text)
            else:
                spec = parse_cached(text, shown)
        except KvdslError as exc:
            self.ws.errors.extend(flatten(exc))
            return
        except OSError as exc:
            self.ws.errors.append(ImportFailure(f"cannot read `{shown}`: {exc.strerror}", span))
            return
        self.ws.files.append(shown)
        self.ws.texts[shown] = (digest, all(isinstance(item, (Block, Import)) for item in spec.items), spec)
        self.stack.append(path)
        self._collect(spec, path, prelude)
        self.stack.pop()

    def _collect(self, spec: SpecFile, path: Path, prelude: bool) -> None:
        for item in spec.items:
            if isinstance(item, Import):
                self.load(spec_location(item.path, path.parent), prelude, item.span)
            elif isinstance(item, Block):
                if item.kind not in self.leave_out or len(self.stack) == 1:  # a given file's (or the prelude's)
                    self.ws.blocks.append((item, prelude))
            elif isinstance(item, Defaults):
                self.ws.defaults.append((item, prelude))
            elif isinstance(item, FnDef):
                self.ws.functions.append((item, prelude))


def _new_digest(leave_out: tuple):
    digest = hashlib.blake2b(digest_size=20)
    if leave_out:
        digest.update(("left out: " + ",".join(leave_out) + "\n").encode())
    return digest


def _digest(digest, shown: str, text: str, prelude: bool) -> None:
    digest.update(f"{len(shown)}:{shown}{len(text)}:{int(prelude)}".encode("utf-8", "surrogatepass"))
    digest.update(text.encode("utf-8", "surrogatepass"))


def fingerprint_of(sources: list, leave_out: tuple = ()) -> Optional[str]:
    """The fingerprint the files of `sources` (a workspace's `sources`) have now, or None if one cannot be read.

    The files are read (an editor's unsaved buffer in place of its file) but
    not parsed, and kept for quoting in messages.  Equal to the workspace's
    `fingerprint` when no file changed: then `load` would find the same files.
    """
    overlay = _OVERLAY.get()
    digest = _new_digest(leave_out)
    try:
        for reached, resolved, shown, prelude in sources:
            path = Path(reached).resolve()
            if str(path) != resolved or display_path(path) != shown or not (path in overlay or path.is_file()):
                return None  # moved, or no longer a regular file (a FIFO would block the read): load it again
            text = overlay[path] if path in overlay else read_spec(path, shown)
            _digest(digest, shown, text, prelude)
            remember_source(shown, text)
    except (KvdslError, OSError, ValueError, RuntimeError):
        return None
    return digest.hexdigest()


def prelude_files() -> list[Path]:
    return sorted(PRELUDE.glob("*.kvspec"))


def load(paths: list[str], leave_out: tuple = (), known: Optional[dict] = None) -> Workspace:
    """Load the prelude and the given files (with their imports, each once).

    Blocks of the kinds in `leave_out` are read only from the given files,
    not from the files they import (`plan` needs no other deployment).
    """
    loader = _Loader(tuple(leave_out), known)
    for path in prelude_files():
        loader.load(path, prelude=True)
    for given in paths:
        loader.load(spec_location(str(given), Path()), prelude=False)
    loader.ws.fingerprint = loader.digest.hexdigest()
    return loader.ws
