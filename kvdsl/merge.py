"""Resolver pass 1: every block's cells, merged from its kind's defaults, the
blocks it extends, its own lines, layer patterns and `--set`; engine rules
instantiated in every deployment; cells no kind defines refused.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from . import model as m
from .errors import KvdslError, CycleError, DimensionError, DuplicateError, ReferenceKindError, UnknownNameError, did_you_mean
from .program import BlockInfo, Form, Origin, ResolvedCell
from .units import NUMBER, TOKENS

LET_HINT = "a cell of your own is declared with `let {name} = ...`"


class Merger:
    """Builds `self.blocks` and `self.cells` (the resolver's state) from the workspace."""

    def collect_blocks(self) -> None:
        for block, prelude in self.ws.blocks:
            if block.name in self.blocks:
                first = self.blocks[block.name].block
                self.errors.append(
                    DuplicateError(f"block `{block.name}` is defined twice", block.name_span, hint=f"first defined at {first.name_span}")
                )
                continue
            self.blocks[block.name] = BlockInfo(block.name, block.kind, block.title, block, prelude)

    def _own_cells(self, cells, where: str) -> dict:
        out: dict[str, m.Cell] = {}
        for cell in cells:
            if cell.name in out:
                self.errors.append(
                    DuplicateError(f"cell `{cell.name}` is defined twice in {where}", cell.name_span, hint=f"first defined at {out[cell.name].name_span}")
                )
                continue
            out[cell.name] = cell
        return out

    # ---- what a kind defines ----------------------------------------------

    def defined_cells(self, kind: str) -> set:
        """The cells every block of `kind` has: the prelude's defaults, and `let` cells of any defaults."""
        if kind not in self._defined:
            names = set()
            for d, prelude in self.ws.defaults:
                if kind in d.kinds:
                    names.update(c.name for c in d.cells if prelude or c.new or c.form == "declare")
            self._defined[kind] = names
        return self._defined[kind]

    def _prelude_cells(self, kind: str) -> set:
        return {c.name for d, prelude in self.ws.defaults if prelude and kind in d.kinds for c in d.cells}

    def check_user_defaults(self) -> None:
        """A user's `defaults` may change what the prelude defines, or `let` new cells."""
        for d, prelude in self.ws.defaults:
            if prelude:
                continue
            for cell in d.cells:
                if cell.form in ("require", "declare"):
                    continue
                kinds = [k for k in d.kinds if k in m.BLOCK_KINDS]
                undefined = [k for k in kinds if cell.name not in self._prelude_cells(k)]
                if cell.new and len(undefined) < len(kinds):
                    self.errors.append(self._already_defined(cell, ", ".join(k for k in kinds if k not in undefined)))
                elif not cell.new and [k for k in undefined if cell.name not in self.defined_cells(k)]:
                    self.errors.append(self._unknown_cell(cell, f"a {undefined[0]}", self.defined_cells(undefined[0])))

    def _unknown_cell(self, cell: m.Cell, owner: str, candidates, local: str = "") -> UnknownNameError:
        name = local or cell.name
        close = did_you_mean(name, [c for c in candidates if not c.startswith(m.REQUIRE + " ")])
        if local:
            return UnknownNameError(f"`{cell.name}` is not a cell of {owner}", cell.name_span,
                                    hint=close or "an engine's own cells are written in its `engine` block")
        hint = LET_HINT.format(name=cell.name)
        return UnknownNameError(f"`{cell.name}` is not a cell of {owner}", cell.name_span,
                                hint=f"{close} Or: {hint}" if close else hint[0].upper() + hint[1:])

    def _already_defined(self, cell: m.Cell, owner: str) -> DuplicateError:
        return DuplicateError(f"`let {cell.name}`: every {owner} already has a cell `{cell.name}`", cell.name_span,
                              hint=f"set it without `let`: `{cell.name} = ...`")

    def _check_strict(self, info: BlockInfo, cells: dict, known: set) -> dict:
        """The block's own cells that its kind (or a parent, or `let`) defines; an error for each other."""
        if info.kind in m.INSTANCED:  # an engine's cells are its rules: it defines them
            return cells
        kept = {}
        for name, cell in cells.items():
            if cell.form == "require" or _is_scoped(name):
                kept[name] = cell
            elif cell.new and name in known:
                self.errors.append(self._already_defined(cell, info.kind if name in self.defined_cells(info.kind) else f"block extending `{info.block.extends}`"))
            elif not cell.new and name not in known:
                self.errors.append(self._unknown_cell(cell, f"{info.kind} `{info.name}`", known))
            else:
                kept[name] = cell
        return kept

    # ---- one block -----------------------------------------------------------

    def _defaults(self, kind: str) -> dict:
        merged: dict[str, list] = {}
        for d, _ in self.ws.defaults:
            if kind in d.kinds:
                for name, cell in self._own_cells(d.cells, f"defaults for {kind}").items():
                    merged.setdefault(name, []).insert(0, (cell, Origin.DEFAULTS))
        return merged

    def _chain(self, info: BlockInfo) -> list:
        """The block and its parents, nearest first."""
        chain, seen = [info], {info.name}
        while chain[-1].block.extends:
            b = chain[-1].block
            parent = self.blocks.get(b.extends)
            if parent is None:
                self.errors.append(
                    UnknownNameError(f"`{b.name}` extends `{b.extends}`, which is not defined", b.extends_span,
                                     hint=did_you_mean(b.extends, [n for n, i in self.blocks.items() if i.kind == b.kind]))
                )
                break
            if parent.kind != b.kind:
                self.errors.append(ReferenceKindError(f"a {b.kind} cannot extend the {parent.kind} `{parent.name}`", b.extends_span))
                break
            if parent.name in seen:
                loop = [c.name for c in chain][[c.name for c in chain].index(parent.name):]
                if info.name == min(loop):
                    names = " -> ".join(loop + [parent.name])
                    self.errors.append(CycleError(f"blocks extend each other in a cycle: {names}", b.extends_span))
                else:
                    self.errors.append(Silent())
                break
            seen.add(parent.name)
            chain.append(parent)
        return chain

    def merge_block(self, info: BlockInfo) -> None:
        """A block's cells: its kind's defaults, under its parents' cells, under its own, under `--set`."""
        stacks: dict[str, list] = self._defaults(info.kind)  # name -> definitions, nearest first
        default_order = list(stacks)
        before = len(self.errors)
        chain = self._chain(info)
        if len(self.errors) > before:
            self._broken.add(info.name)
        known = set(self.defined_cells(info.kind))
        for parent in reversed(chain):
            origin = Origin.OWN if parent is info else Origin.EXTENDS
            cells = self._own_cells(parent.block.cells, f"`{parent.name}`")
            cells = self._check_strict(parent, cells, known)
            known.update(n for n in cells if not _is_scoped(n))
            derived = self._pattern_cells(parent, cells, set(default_order))
            if derived:  # a block's own pattern replaces what its parent's pattern said
                for stack in stacks.values():
                    stack[:] = [entry for entry in stack if entry[1] != Origin.PATTERN]
            for name, cell in derived.items():
                stacks.setdefault(name, []).insert(0, (cell, Origin.PATTERN))
            for name, cell in cells.items():
                stacks.setdefault(name, []).insert(0, (cell, origin))
        for name, cell in self.overrides.get(info.name, {}).items():
            stacks.setdefault(name, []).insert(0, (cell, Origin.SET))
        scoped = {n: s for n, s in stacks.items() if _is_scoped(n)}  # `vllm.x = ...`: set in the instance
        stacks = {n: s for n, s in stacks.items() if not _is_scoped(n)}
        self._scoped[info.name] = scoped
        written = dict.fromkeys(c.name for c in info.block.cells)
        names = [n for n in written if n in stacks] + [n for n in default_order if n not in written and n in stacks]
        listed = set(names)
        names += [n for n in stacks if n not in listed]
        names = [n for n in names if stacks[n]]
        if info.kind in m.INSTANCED:
            info.template = {n: stacks[n] for n in names}
            names = [n for n in names if self._is_literal(stacks[n][0][0])]
        info.cells = [n for n in names if not n.startswith(m.REQUIRE + " ")]
        info.requirements = [n for n in names if n.startswith(m.REQUIRE + " ")]
        for name in names:
            cell, origin = stacks[name][0]
            self.cells[(info.name, name)] = self._classify(info.name, name, cell, origin, tuple(c for c, _ in stacks[name][1:]))

    @staticmethod
    def _is_literal(cell: m.Cell) -> bool:
        """A cell an engine block shows by itself: text or a number, no rule."""
        return cell.form == "text" or (cell.form == "rule" and isinstance(cell.expr, (m.Num, m.Bool)))

    def instantiate(self, info: BlockInfo) -> None:
        """Every engine's rules as cells of this deployment: `vllm.num_blocks`, ..."""
        engines = [e for e in self.blocks.values() if m.INSTANCED.get(e.kind) == info.kind and e.template is not None]
        scoped = self._scoped.get(info.name, {})
        for name, stack in scoped.items():
            engine, _, cell = name.partition(".")
            target = self.blocks.get(engine)
            if target is None or m.INSTANCED.get(target.kind) != info.kind:
                self.errors.append(UnknownNameError(
                    f"`{name}`: `{engine}` is not an engine", stack[0][0].name_span,
                    hint=did_you_mean(engine, [e.name for e in engines]) or "engines: " + ", ".join(e.name for e in engines)))
            elif cell not in target.template or stack[0][0].new:
                self.errors.append(self._unknown_cell(stack[0][0], f"engine `{engine}`", target.template, local=cell))
        for engine in engines:
            for local, stack in engine.template.items():
                name = f"{engine.name}.{local}" if not local.startswith(m.REQUIRE + " ") else f"{local} {engine.name}"
                own = scoped.get(f"{engine.name}.{local}", [])
                entries = list(own) + [(c, o if o == Origin.SET else Origin.ENGINE) for c, o in stack]
                cell, origin = entries[0]
                rc = self._classify(info.name, name, cell, origin, tuple(c for c, _ in entries[1:]))
                rc.scope = engine.name
                self.cells[(info.name, name)] = rc
                (info.requirements if local.startswith(m.REQUIRE + " ") else info.cells).append(name)

    def _pattern_cells(self, info: BlockInfo, cells: dict, known: set) -> dict:
        """`layer_kinds = [sliding(128), full] * 12` -> sliding_layers, full_layers, window, layers."""
        out: dict[str, m.Cell] = {}
        kinds = sorted(n[: -len("_layers")] for n in known if n.endswith("_layers"))
        for cell in cells.values():
            if cell.form != "pattern":
                continue
            if out:
                self.errors.append(DuplicateError("a block has one layer pattern", cell.name_span))
                continue
            counts: dict[str, int] = {}
            window = None
            for layer in cell.layers:
                if f"{layer.kind}_layers" not in known:
                    self.errors.append(UnknownNameError(
                        f"unknown layer kind `{layer.kind}`", layer.span,
                        hint=did_you_mean(layer.kind, kinds) or "layer kinds: " + ", ".join(kinds)))
                    continue
                counts[layer.kind] = counts.get(layer.kind, 0) + 1
                if layer.argument is not None and layer.kind != "sliding":
                    self.errors.append(DimensionError(
                        f"only `sliding` layers take an argument (the window), not `{layer.kind}`", layer.span))
                elif layer.argument is not None:
                    arg = layer.argument
                    if window is not None and window.value != arg.value:
                        self.errors.append(DimensionError("every layer of a pattern must have the same window", arg.span))
                    window = arg
            shape = self._kind_shape(cell.layers)
            derived = {f"{kind}_layers": count for kind, count in counts.items()}
            derived.setdefault("layers", len(cell.layers))
            for name, count in derived.items():
                out[name] = dataclasses.replace(cell, name=name, form="rule", expr=m.Num(Fraction(count), NUMBER, cell.span), layers=())
            if window is not None:
                wnum = window if not window.bare else dataclasses.replace(window, dim=TOKENS, bare=False)
                out["window"] = dataclasses.replace(cell, name="window", form="rule", expr=wnum, layers=())
            for name, value in shape.items():
                out[name] = dataclasses.replace(cell, name=name, form="rule", expr=value, layers=())
            if "layer_period" in known:
                for name, value in layer_order([layer.kind for layer in cell.layers]).items():
                    out[name] = dataclasses.replace(cell, name=name, form="rule", expr=m.Num(Fraction(value), NUMBER, cell.span), layers=())
        for name, cell in list(out.items()):
            explicit = cells.get(name)
            if explicit is None:
                continue
            del out[name]
            if name == "layers" and not isinstance(explicit.expr, m.Num):
                self.errors.append(DimensionError(
                    "with a layer pattern, `layers` must be a plain number (or left out)", explicit.expr.span if explicit.expr else explicit.span))
            elif name == "layers" and explicit.expr.value != cell.expr.value:
                self.errors.append(
                    DimensionError(f"the layer pattern has {cell.expr.value} layers but `layers` is {explicit.expr.value}", cell.span)
                )
            elif name != "layers":
                self.errors.append(DuplicateError(f"`{name}` is set both by the layer pattern and explicitly", explicit.name_span, hint=f"the pattern is at {cell.span}"))
        return out

    def _kind_shape(self, layers) -> dict:
        """`sliding(1024, kv_heads = 16, head_dim = 256)` -> sliding_kv_heads, sliding_k_head_dim, sliding_v_head_dim."""
        shapes: dict[str, dict] = {}
        for layer in layers:
            if layer.shape and layer.kind != "sliding":
                self.errors.append(DimensionError(
                    f"only `sliding` layers take a shape of their own; `{layer.kind}` layers have the model's "
                    f"(`kv_heads`, `head_dim`, ...)", layer.shape[0].span))
                continue
            if layer.kind != "sliding":
                continue
            shape = {}
            for setting in layer.shape:
                if setting.name not in SHAPE_SETTINGS:
                    self.errors.append(UnknownNameError(
                        f"a layer's shape has no `{setting.name}`", setting.span,
                        hint=did_you_mean(setting.name, SHAPE_SETTINGS) or "shape settings: " + ", ".join(SHAPE_SETTINGS)))
                    continue
                if not setting.value.bare or setting.value.value < 0 or setting.value.value.denominator != 1:
                    self.errors.append(DimensionError(f"`{setting.name}` is a whole number, not `{setting.value}`", setting.value.span))
                    continue
                for cell in SHAPE_SETTINGS[setting.name]:
                    shape[f"{layer.kind}_{cell}"] = setting.value
            key = tuple(sorted((n, v.value) for n, v in shape.items()))
            previous = shapes.setdefault(layer.kind, {"key": key, "shape": shape})
            if previous["key"] != key:
                self.errors.append(DimensionError(f"every `{layer.kind}` layer of a pattern must have the same shape", layer.span))
        return {name: value for entry in shapes.values() for name, value in entry["shape"].items()}

    @staticmethod
    def _classify(block: str, name: str, cell: m.Cell, origin: Origin, shadowed: tuple) -> ResolvedCell:
        form = Form(cell.form) if cell.form != "rule" else Form.RULE
        rc = ResolvedCell(block, name, cell, origin, form, shadowed=shadowed)
        if form == Form.RULE and isinstance(cell.expr, (m.Num, m.Bool)):
            rc.form = Form.INPUT
            rc.expr = cell.expr
        return rc


# the shape a layer kind may carry, and the cells each setting sets (prefixed by the kind)
SHAPE_SETTINGS = {
    "kv_heads": ("kv_heads",),
    "head_dim": ("k_head_dim", "v_head_dim"),
    "k_head_dim": ("k_head_dim",),
    "v_head_dim": ("v_head_dim",),
}


ORDERED_KINDS = ("full", "sliding", "ssm")


def layer_order(kinds: list) -> dict:
    """Where a layer pattern puts each kind, when an engine can place layers
    from it: the shortest period the sequence repeats with (a last, shorter
    repeat allowed), made of full, sliding and ssm layers only, in which every
    kind but at most one fills one run of consecutive positions.  Gives
    `layer_period` and each such kind's run (`full_start`, `full_run`, ...);
    nothing when the pattern has no such period."""
    period = len(kinds) - _border(kinds)
    head = kinds[:period]
    if any(kind not in ORDERED_KINDS for kind in head):
        return {}
    runs = {}
    for kind in ORDERED_KINDS:
        where = [i for i, k in enumerate(head) if k == kind]
        if where and where[-1] - where[0] + 1 == len(where):
            runs[kind] = (where[0], len(where))
    present = set(head)
    if len(present - set(runs)) > 1:
        return {}
    out = {"layer_period": period}
    for kind, (start, length) in runs.items():
        out[f"{kind}_start"] = start
        out[f"{kind}_run"] = length
    return out


def _border(items: list) -> int:
    """The length of the longest proper prefix of `items` that is also its suffix (KMP)."""
    border = [0] * len(items)
    k = 0
    for i in range(1, len(items)):
        while k and items[i] != items[k]:
            k = border[k - 1]
        if items[i] == items[k]:
            k += 1
        border[i] = k
    return border[-1] if items else 0


def _is_scoped(name: str) -> bool:
    """`vllm.x`: a deployment's setting of an engine's cell (a requirement's name has dots too)."""
    return "." in name and not name.startswith(m.REQUIRE + " ")


class Silent(KvdslError):
    """A mistake already reported from elsewhere: marks a block broken, prints nothing."""

    def __init__(self):
        super().__init__("")
