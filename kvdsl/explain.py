"""`kvdsl explain`: how a number comes about, rule by rule, with the values."""

from __future__ import annotations

import math

from .display import format_value
from .evaluate import taken_branches
from .exprtext import expr_text, quoted
from .graph import Key, Program
from .labels import describe, is_labelled


class Explainer:
    """Walks a cell's dependencies depth first, each cell once."""

    def __init__(self, program: Program, values: dict, max_depth: int = 99):
        self.program = program
        self.values = values
        self.max_depth = max_depth
        self.seen: set = set()
        self.lines: list[str] = []
        self.steps: list[dict] = []  # the same walk as data, for `explain --json`

    def value_text(self, key: Key) -> str:
        value = self.values.get(key)
        if isinstance(value, str) and self.program.cells[key].form == "rule":
            return quoted(value)  # a text a rule computes, as the rule would write it
        return format_value(value, self.program.cells[key].dim)

    def operand_text(self, key: Key) -> str:
        """A value inside a substituted rule: texts quoted, so `engine == "vllm"` reads as written."""
        value = self.values.get(key)
        return quoted(value) if isinstance(value, str) else self.value_text(key)

    def explain(self, key: Key, label: str, depth: int = 0) -> None:
        rc = self.program.cells[key]
        pad = "  " * depth
        where = f"[{rc.span.path}:{rc.span.line}]"
        value = self.value_text(key)
        step = self.step(key, label, depth)
        if key in self.seen:
            self.lines.append(f"{pad}{label} = {value}  (see above)")
            step["see_above"] = True
            return
        self.seen.add(key)
        if rc.form in ("input", "text", "unknown"):
            kind = {"input": "input", "text": "text", "unknown": "solved"}[str(rc.form)]
            self.lines.append(f"{pad}{label} = {value}  ({kind}) {where}")
            return
        if rc.form == "ref":
            kind = self.program.blocks[rc.ref_target].kind
            self.lines.append(f"{pad}{label} = {rc.ref_target}  (names {'an' if kind[0] in 'aeiou' else 'a'} {kind}) {where}")
            step["names"] = rc.ref_target
            return
        rule = rc.cell.source.split('=', 1)[1].strip()
        if rc.cell.member:  # a member of a family: which one
            where = f"({rc.cell.member[0]} = {rc.cell.member[1]})  {where}"
        self.lines.append(f"{pad}{label} = {rule}  {where}")
        # the path to this cell's block, as the label reads it (`model.` for `model.layers`;
        # none for an engine's cell the block runs, `vllm.num_blocks`)
        prefix = label[: -len(key[1])].rstrip(".") if label.endswith(key[1]) else label.rpartition(".")[0]

        def qualified(r):
            name = r.key[1] if not r.via and r.key[0] == key[0] else r.text
            return f"{prefix}.{name}" if prefix else name
        held: list = []
        expr = taken_branches(rc.expr, self.values, held)
        substituted = expr_text(expr, lambda r: self.operand_text(r.key))
        because = "; ".join(expr_text(c, lambda r: self.operand_text(r.key)) for c in held)
        step.update(rule=rule, substituted=substituted, conditions=[
            expr_text(c, lambda r: self.operand_text(r.key)) for c in held])
        if substituted != value:
            self.lines.append(f"{pad}  = {substituted}" + (f"  (as {because})" if because else ""))
        elif because:
            self.lines.append(f"{pad}  (as {because})")
        self.lines.append(f"{pad}  = {value}")
        if depth >= self.max_depth:
            return
        for ref in _unique_refs(expr):
            self.explain(ref.key, qualified(ref), depth + 1)


    def step(self, key: Key, label: str, depth: int) -> dict:
        """Record one visited cell for the JSON form; the caller fills in how it is defined."""
        from .display import json_number

        rc = self.program.cells[key]
        value = self.values.get(key)
        step = {"cell": label, "key": f"{key[0]}.{key[1]}", "depth": depth, "text": self.value_text(key),
                "value": None if isinstance(value, float) and not math.isfinite(value) else json_number(value),
                "unit": rc.dim.unit() if hasattr(rc.dim, "unit") else None,
                "form": _FORMS.get(str(rc.form), str(rc.form)), "path": rc.span.path, "line": rc.span.line,
                "see_above": False}
        self.steps.append(step)
        return step


_FORMS = {"unknown": "solved", "ref": "reference"}


def _unique_refs(expr):
    from .graph import walk_refs

    seen = set()
    for ref in walk_refs(expr):
        if ref.key not in seen:
            seen.add(ref.key)
            yield ref


def explain(program: Program, values: dict, key: Key, max_depth: int = 99) -> str:
    """The explanation of one cell as text."""
    explainer = Explainer(program, values, max_depth)
    explainer.explain(key, key[1])
    header = f"{key[0]}.{key[1]} = {explainer.value_text(key)}"
    rc = program.cells[key]
    if is_labelled(rc):
        header += "\n" + describe(rc).sentence
    return header + "\n" + "\n".join(explainer.lines)


def explain_json(program: Program, values: dict, key: Key, max_depth: int = 99) -> dict:
    """The explanation as data: the cell, then every rule visited, depth first.

    Each step has `cell` (as the rule above names it), `key` (`block.cell`),
    `depth`, `form` (rule, input, text, solved, reference), `value`, `unit`,
    `text` (the value as printed), `path` and `line`; a rule adds `rule`,
    `substituted` and `conditions` (those that chose its branches); a cell
    already explained above has `see_above`.  `label` and `description` are
    the cell's words for a reader (`kvdsl.labels`).
    """
    explainer = Explainer(program, values, max_depth)
    explainer.explain(key, key[1])
    first = explainer.steps[0]
    label = describe(program.cells[key])
    return {"block": key[0], "cell": key[1], "label": label.label, "description": label.description,
            "value": first["value"], "unit": first["unit"], "text": first["text"], "steps": explainer.steps}
