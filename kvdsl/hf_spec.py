"""The model spec `kvdsl import` writes: its cells, names, titles and quoting."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from .errors import ConfigAssumption, UsageError
from .hf_config import MAX_NAME, MAX_TITLE, Config, visible
from .params import ParamCount
from .words import reserved


@dataclass
class SpecCell:
    name: str
    value: str
    comment: str = ""


@dataclass
class ImportedModel:
    """One model block as `kvdsl import` writes it."""

    name: str
    title: str
    source: str
    family: str
    cells: list[SpecCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    assumptions: list[ConfigAssumption] = field(default_factory=list)
    params: Optional[ParamCount] = None
    window: Optional[int] = None
    weight_dtype: str = "bf16"
    weight_comment: str = ""
    expert_dtype: Optional[str] = None
    hf_id: str = ""  # the Hugging Face repository, when the config names one
    model_type: str = ""  # the config's architecture (model_type), when it names one

    def add(self, name: str, value, comment: str = "") -> None:
        self.cells.append(SpecCell(name, str(value), comment))

    def value(self, name: str) -> Optional[str]:
        return next((c.value for c in self.cells if c.name == name), None)

    def render(self) -> str:
        """The kvspec text: a header of notes and assumptions, then the block."""
        # Everything here may quote the config (its names, its values, its file name): each
        # comment goes through `visible` and each string through `quoted`, so no text of the
        # config can end a comment or a string and write kvspec of its own.
        lines = [f"# {self.title} ({self.family} architecture), imported from {self.source} by `kvdsl import`."]
        lines += [f"# {note}" for note in self.notes]
        lines += [f"# assumed: {a.message}" for a in self.assumptions]
        lines = [visible(line) for line in lines]
        lines.append(f'model {self.name} "{quoted(self.title)}" {{')
        lines.append(f'    source = "{quoted(self.source)}"')
        if self.hf_id:
            lines.append(f'    hf_id = "{quoted(self.hf_id)}"')
        if self.model_type:
            lines.append(f'    model_type = "{quoted(self.model_type)}"')
        for cell in self.cells:
            text = f"    {cell.name} = {cell.value}"
            lines.append(f"{text:<30} # {visible(cell.comment)}" if cell.comment else text)
        lines.append("}")
        return "\n".join(lines) + "\n"


def quoted(text: str) -> str:
    """`text` inside a kvspec string: visible, with `\\` and `"` escaped."""
    return visible(text).replace("\\", "\\\\").replace('"', '\\"')


def block_name(title: str) -> str:
    """A kvspec block name from a model's name: `Llama-3.1-8B` -> `llama_3_1_8b`.

    A name that is a keyword or a block of the prelude (`fp8`) gets `_model` after it.
    """
    name = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "model"
    if name[0].isdigit():
        name = "m_" + name
    name = name[:MAX_NAME - len("_model")].rstrip("_")
    return name + "_model" if name in set(reserved()) or name in prelude_blocks() else name


@lru_cache(maxsize=1)
def prelude_blocks() -> dict[str, str]:
    """The prelude's block names, each with its kind: names an imported model cannot take."""
    from .loader import load

    return {block.name: block.kind for block, prelude in load([]).blocks if prelude}


def check_options(name: Optional[str], title: Optional[str]) -> None:
    """Refuse a --name or --title the spec could not carry, before any file is read."""
    if name is not None:
        shown = visible(name)
        if len(name) > MAX_NAME:
            raise UsageError(f"--name is {len(name):,} characters long: a model's name has at most {MAX_NAME}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name) or name in set(reserved()):
            raise UsageError(f"--name `{shown}` is not a kvspec name: letters, digits and `_`, not starting with a digit, not a keyword")
        if name in prelude_blocks():
            raise UsageError(f"--name `{name}` is already a {prelude_blocks()[name]} of kvdsl's prelude: choose another name")
    if title is not None:
        if len(title) > MAX_TITLE:
            raise UsageError(f"--title is {len(title):,} characters long: a title has at most {MAX_TITLE}")
        if not title.isprintable():
            raise UsageError(f"--title `{visible(title)}` must be one line of printable text (no line breaks or control characters)")


def published_name(config: Config) -> tuple[str, str]:
    """(repository id, display title) from `_name_or_path` or an `org__Model.json` file name."""
    named = config.data.get("_name_or_path")
    if isinstance(named, str) and named.strip() and not named.startswith(("/", ".")):
        repo = named.strip().rstrip("/")
    else:
        stem = Path(config.path).stem
        repo = stem.replace("__", "/", 1) if "__" in stem else stem
        if stem == "config":
            folder = Path(config.path).resolve().parent
            repo = folder.name or "model"
            # a hub cache's snapshot: models--ORG--NAME/snapshots/REVISION/config.json
            if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
                repo = folder.parent.parent.name[len("models--"):].replace("--", "/", 1)
    return repo, repo.split("/")[-1]
