"""Resolver pass 2: names in expressions -> the cells they mean, across blocks
and imports; cells that must name a block checked for its kind; `engine.x`
compiled to the choice over every engine.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from . import model as m
from .errors import KvdslError, MissingCellError, ReferenceKindError, UnknownNameError, did_you_mean
from .program import CellRef, Form, Key, ResolvedCell
from .visitor import map_names
from .units import BOOL, DECLARED_DIMS, NUMBER

TEXT = "text"  # the dimension of text values
REF = "ref"  # the dimension of a cell that names a block; its value is the block's name, a text
ERROR = object()  # the dimension of a cell that already failed: matches anything, reports nothing


class NameResolver:
    """Name lookup over the resolver's `blocks` and `cells`."""

    # ---- references to blocks ------------------------------------------------

    def ref_target(self, key: Key) -> Optional[str]:
        """The block a reference cell names, or None for any other cell."""
        if key in self._targets:
            return self._targets[key]
        rc = self.cells.get(key)
        if rc is None or rc.form != Form.RULE or not isinstance(rc.cell.expr, m.Name) or key in self._targets_busy:
            return None
        self._targets_busy.add(key)
        try:
            found = self.resolve_name(key[0], rc.cell.expr, quiet=True, scope=rc.scope)
            target = None
            if isinstance(found, str):
                target = found
                rc.ref_expr = found
            elif found is None and self._through_poisoned(key[0], rc.cell.expr, rc.scope):
                self._poisoned.add(key)  # `x = model.kv_dtype` with `model` already reported: so is every x.y
            elif isinstance(found, CellRef):
                target = self.ref_target(found.key)
                if found.key in self._poisoned:
                    self._poisoned.add(key)
                if target is not None:
                    rc.ref_expr = found
        finally:
            self._targets_busy.discard(key)
        self._targets[key] = target
        return target

    def _through_poisoned(self, block: str, name: m.Name, scope: Optional[str]) -> bool:
        """Does `name` read through a reference cell already reported?"""
        local = (block, f"{scope}.{name.parts[0]}") if scope else None
        return (local if local in self.cells else (block, name.parts[0])) in self._poisoned

    def resolve_name(self, block: str, name: m.Name, quiet: bool = False, scope: Optional[str] = None):
        """A Name in `block` -> a CellRef, a block name (str), an expression (`engine.x`), or None after an error.

        In an engine's rules (`scope`), the engine's own cells come first.
        """
        parts = name.parts
        first = parts[0]
        if scope and first == self.blocks[block].kind and len(parts) == 2:
            # `deployment.x` in an engine's rules: the deployment's own `x`, past the engine's
            found = self.resolve_name(block, m.Name(parts[1:], name.span), quiet)
            return CellRef(found.key, found.via, found.span, name.dotted) if isinstance(found, CellRef) else found
        local = (block, f"{scope}.{first}") if scope else None
        if local in self.cells or (block, first) in self.cells:
            head = local if local in self.cells else (block, first)
            if len(parts) == 1:
                return CellRef(head, (), name.span, name.dotted)
            if head in self._poisoned:
                return None
            current = self.ref_target(head)
            if head in self._poisoned:
                return None
            if current is None:
                return self._fail(quiet, UnknownNameError(f"`{first}` is a value, not a block: `{name.dotted}` means nothing", name.span))
            self._consult(block, current)
            via = [head]
        elif first in self.blocks and m.INSTANCED.get(self.blocks[first].kind) == self.blocks[block].kind and len(parts) == 2:
            return self._instance_cell(block, first, parts[1], name, quiet)
        elif first in self.blocks:
            self._consult(block, first)
            if len(parts) == 1:
                return first
            current, via = first, []
        else:
            candidates = [n for (b, n) in self.cells if b == block] + list(self.blocks)
            return self._fail(quiet, UnknownNameError(f"unknown name `{first}`", name.span,
                                                      hint=_members_hint(first, candidates) or did_you_mean(first, candidates)))
        for i, part in enumerate(parts[1:], start=1):
            if self.blocks[current].kind in m.INSTANCED and i == len(parts) - 1:
                return self._dispatch(block, via, part, name, quiet)
            key = (current, part)
            if key not in self.cells:
                own = [n for (b, n) in self.cells if b == current]
                return self._fail(quiet, UnknownNameError(
                    f"{self.blocks[current].kind} `{current}` has no cell `{part}`", name.span, hint=did_you_mean(part, own)))
            if i == len(parts) - 1:
                return CellRef(key, tuple(via), name.span, name.dotted)
            nxt = self.ref_target(key)
            if key in self._poisoned:
                return None
            if nxt is None:
                return self._fail(quiet, UnknownNameError(f"`{'.'.join(parts[: i + 1])}` is a value, not a block", name.span))
            via.append(key)
            current = nxt
            self._consult(block, current)
        return None

    def _consult(self, block: str, other: str) -> None:
        """Note that what `block` resolves to depends on `other` (a rebuild after `other` changes redoes `block`)."""
        if other != block:
            self.consulted.setdefault(block, set()).add(other)

    def _instance_cell(self, block: str, engine: str, cell: str, name: m.Name, quiet: bool):
        """`vllm.num_blocks` in a deployment: that engine's cell, run for this deployment."""
        key = (block, f"{engine}.{cell}")
        if key in self.cells:
            return CellRef(key, (), name.span, name.dotted)
        template = self.blocks[engine].template or {}
        return self._fail(quiet, UnknownNameError(f"engine `{engine}` has no cell `{cell}`", name.span,
                                                  hint=did_you_mean(cell, template)))

    def _dispatch(self, block: str, via: list, cell: str, name: m.Name, quiet: bool):
        """`engine.x`: the chosen engine's `x`, as `if engine == "a" then a.x else if ...`."""
        if len(via) != 1 or via[0][0] != block:
            return self._fail(quiet, UnknownNameError(
                f"`{name.dotted}`: an engine's figures are read through this {self.blocks[block].kind}'s own engine cell", name.span))
        chooser = via[0]
        engines = [e for e in self.blocks.values() if m.INSTANCED.get(e.kind) == self.blocks[block].kind and e.template is not None]
        missing = [e.name for e in engines if cell not in e.template]
        if missing or not engines:
            known = set.intersection(*(set(e.template) for e in engines)) if engines else set()
            return self._fail(quiet, UnknownNameError(
                f"`{name.dotted}`: engine `{missing[0] if missing else '?'}` has no cell `{cell}`", name.span,
                hint=did_you_mean(cell, known) or "every engine must define a cell read through `engine.`"))
        span = name.span
        chosen = CellRef(chooser, (), span, chooser[1])
        *rest, last = engines
        expr = CellRef((block, f"{last.name}.{cell}"), (), span, f"{last.name}.{cell}")
        for engine in reversed(rest):
            test = m.Binary("==", chosen, m.Str(engine.name, span), span)
            expr = m.If(test, CellRef((block, f"{engine.name}.{cell}"), (), span, f"{engine.name}.{cell}"), expr, span)
        return expr

    def _fail(self, quiet: bool, error: KvdslError):
        if not quiet:
            self.errors.append(error)
        return None

    # ---- expressions -------------------------------------------------------------

    def resolve_cell(self, rc: ResolvedCell) -> None:
        if rc.cell.broken:  # its mistake was reported when it was expanded
            rc.dim = ERROR
            self._poisoned.add(rc.key)
            return
        if rc.form == Form.DECLARE:
            decl = rc.cell
            rc.dim = ERROR
            self._poisoned.add(rc.key)
            if rc.block in self._broken:
                return
            owner = self.blocks[rc.block]
            where = f"engine `{rc.scope}`, run by {owner.kind} `{rc.block}`," if rc.scope else f"{owner.kind} `{rc.block}`"
            self.errors.append(MissingCellError(
                f"{where} does not set `{rc.local_name}` ({decl.declared})",
                self.blocks[rc.scope].block.name_span if rc.scope else owner.block.name_span,
                hint=f"`{rc.local_name}` is required by {decl.span}"))
            return
        if rc.form == Form.PATTERN:
            rc.form = Form.TEXT
            return
        if rc.key in self._poisoned and rc.form != Form.REF:
            rc.dim = ERROR
            return
        if rc.form not in (Form.RULE, Form.REQUIRE):
            return
        target = self.ref_target(rc.key) if rc.form == Form.RULE else None
        if target is not None:
            rc.form, rc.ref_target = Form.REF, target
            return
        ok = True
        block, scope, poisoned = rc.block, rc.scope, self._poisoned
        seen = self._seen_for(block, scope)

        def resolve(name: m.Name):
            nonlocal ok, seen
            if len(poisoned) != seen[0]:  # a reference cell failed meanwhile: names through it resolve anew
                seen = self._seen_for(block, scope)
            found = seen[1].get(name.parts)
            if found is not None:
                return _ref(found.key, found.via, name.span, found.text)
            found = self.resolve_name(block, name, scope=scope)
            if isinstance(found, CellRef):
                for key in (found.key, *found.via):
                    if key[0] != block:
                        self.readers.setdefault(key[0], set()).add(block)
                if len(poisoned) == seen[0]:
                    seen[1][name.parts] = found
                return found
            if isinstance(found, str):
                self.errors.append(ReferenceKindError(f"`{name.dotted}` is a {self.blocks[found].kind}, not a value", name.span))
            elif found is not None:
                return found
            ok = False
            return name

        rc.expr = map_names(rc.cell.expr, resolve)
        if not ok:
            rc.dim = ERROR

    def _seen_for(self, block: str, scope: Optional[str]) -> tuple:
        """(poisoned count, {name parts: CellRef}): the names resolved in `block` and `scope` while
        no further cell was poisoned.  A block's rules name the same cells many times: each is resolved once."""
        seen = self._seen_names.get((block, scope))
        if seen is None or seen[0] != len(self._poisoned):
            seen = self._seen_names[(block, scope)] = (len(self._poisoned), {})
        return seen

    # ---- cells that name a block ---------------------------------------------------

    def _expected_kind(self, rc: ResolvedCell) -> Optional[str]:
        for cell in rc.shadowed:
            if cell.form == "declare" and cell.declared in m.BLOCK_KINDS:
                return cell.declared
            if cell.form == "rule" and isinstance(cell.expr, m.Name):
                found = self.resolve_name(rc.block, cell.expr, quiet=True, scope=rc.scope)
                if isinstance(found, str):
                    return self.blocks[found].kind
                if isinstance(found, CellRef):
                    target = self.ref_target(found.key)
                    if target:
                        return self.blocks[target].kind
            if cell.form in ("rule", "declare"):
                return None
        return None

    def check_slot(self, rc: ResolvedCell) -> None:
        """A cell that must name a block (`model`, `kv_dtype`) does so, with the right kind.

        A cell that fails here is poisoned: names read through it fail quietly
        instead of repeating the mistake at every use.
        """
        if rc.form in (Form.UNKNOWN, Form.TEXT, Form.PATTERN):
            expected = self._expected_kind(rc)
            if expected:
                self._poisoned.add(rc.key)
                what = {"unknown": "`?`", "text": "a quoted string", "pattern": "a layer pattern"}[rc.form.value]
                self.errors.append(ReferenceKindError(
                    f"`{rc.name}` must name a {expected}, not {what}", rc.cell.span, hint=self._choices(expected)))
            return
        if rc.form not in (Form.RULE, Form.INPUT) or rc.cell.broken:
            return
        expr = rc.cell.expr
        if isinstance(expr, m.Name) and len(expr.parts) > 1 and (rc.block, expr.parts[0]) in self._poisoned:
            self._poisoned.add(rc.key)  # read through a reference already reported
            return
        target = self.ref_target(rc.key)
        if target is not None:
            rc.form, rc.ref_target = Form.REF, target
            self._check_ref_kind(rc)
            return
        expected = self._expected_kind(rc)
        if not expected:
            return
        self._poisoned.add(rc.key)
        if isinstance(expr, m.Name) and len(expr.parts) == 1 and (rc.block, expr.parts[0]) not in self.cells:
            self.errors.append(UnknownNameError(
                f"unknown {expected} `{expr.dotted}`", expr.span, hint=self._choices(expected, expr.dotted)))
        else:
            self.errors.append(ReferenceKindError(
                f"`{rc.name}` must name a {expected}", expr.span, hint=self._choices(expected)))

    def _check_ref_kind(self, rc: ResolvedCell) -> None:
        expected = self._expected_kind(rc)
        actual = self.blocks[rc.ref_target].kind
        if expected and expected != actual:
            self._poisoned.add(rc.key)
            self.errors.append(ReferenceKindError(
                f"`{rc.name}` must name a {expected}, but `{rc.ref_target}` is a {actual}", rc.cell.expr.span,
                hint=self._choices(expected, rc.ref_target)))

    def _choices(self, kind: str, near: Optional[str] = None) -> str:
        """What a reference to a block of `kind` may name: the closest, the blocks loaded, the catalog's."""
        from .loader import catalog_import, catalog_names

        names = sorted(n for n, b in self.blocks.items() if b.kind == kind)
        shipped = [n for n in catalog_names(kind) if n not in names]
        if near in shipped:
            return f"the catalog has it: {catalog_import(kind, near)}"
        close = did_you_mean(near, names) if near else None
        if close or not shipped:
            return close or (f"{kind} blocks: " + ", ".join(names) if names else f"no {kind} block is defined: import one")
        loaded = f"{kind} blocks: " + ", ".join(names) + "; " if names else ""
        return (loaded + f"the catalog's, each brought by {catalog_import(kind, 'NAME')}: " + ", ".join(shipped)
                + (f" ({did_you_mean(near, shipped)})" if near and did_you_mean(near, shipped) else ""))

    # ---- static dimensions ------------------------------------------------------------

    def inherited_dim(self, rc: ResolvedCell):
        """The dimension the cell would have without its own value (for `?` and bare numbers)."""
        return self._static_dim(rc.block, rc.shadowed, frozenset(), rc.scope)

    def _static_dim(self, block: str, stack: tuple, seen: frozenset, scope: Optional[str]):
        """The dimension a definition has by itself: declared, written, or read from the one cell it names.

        It never infers other expressions, so it cannot run into a cycle.
        """
        if not stack:
            return None
        cell = stack[0]
        if cell.form == "declare":
            return DECLARED_DIMS.get(cell.declared)
        if cell.form == "text":
            return TEXT
        if cell.form != "rule":
            return None
        expr = cell.expr
        if isinstance(expr, m.Bool):
            return BOOL
        if isinstance(expr, m.Num):
            if not expr.bare:
                return expr.dim
            below = self._static_dim(block, stack[1:], seen, scope)
            return below if below is not None else NUMBER
        if isinstance(expr, m.Name):
            found = self.resolve_name(block, expr, quiet=True, scope=scope)
            if isinstance(found, CellRef) and found.key not in seen:
                target = self.cells[found.key]
                return self._static_dim(found.key[0], (target.cell,) + target.shadowed, seen | {found.key}, target.scope)
        if isinstance(expr, m.If):  # `if ... then a else b`: the first branch that tells
            for branch in (expr.then, expr.otherwise):
                dim = self._static_dim(block, (dataclasses.replace(cell, expr=branch),) + stack[1:], seen, scope)
                if dim not in (None, NUMBER):
                    return dim
        return None


def _ref(key, via: tuple, span, text: str) -> CellRef:
    """CellRef(key, via, span, text), made without the frozen dataclass's constructor.

    hazard: the names pass makes one for every name of every rule of every block.
    """
    ref = object.__new__(CellRef)
    ref.__dict__.update(key=key, via=via, span=span, text=text)
    return ref


def _members_hint(name: str, candidates: list) -> Optional[str]:
    """`x[9]` when the family `x` has members x[1] to x[8]: say which it has."""
    family, bracket, _ = name.partition("[")
    if not bracket:
        return None
    numbers = sorted(int(c[len(family) + 1:-1]) for c in candidates
                     if c.startswith(family + "[") and c.endswith("]") and c[len(family) + 1:-1].isdigit())
    if not numbers:
        return None
    return f"the family `{family}` has the members {family}[{numbers[0]}] to {family}[{numbers[-1]}]"
