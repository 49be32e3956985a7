"""What a reader calls a cell: its label and one-sentence description.

A rule's label is written once, in the prelude, on a `##` line right above it:

    ## Concurrent users that fit: the most sequences of `context` tokens whose KV cache fits at once.
    max_batch = ...

The text before the first `: ` is the label, the rest the description.  A block
that overrides the rule (`gpus = 4`) keeps the label of the rule it overrides.
`eval`, `explain` and the workbook's headers and notes all read it from here.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

# Words a cell name abbreviates, as a label writes them.
WORDS = {"kv": "KV", "gpu": "GPU", "gpus": "GPUs", "tp": "TP", "pp": "PP", "ttft": "TTFT", "tpot": "TPOT", "ssm": "SSM",
         "mla": "MLA", "mha": "MHA", "moe": "MoE", "id": "ID", "usd": "USD", "fp8": "FP8", "flops": "FLOP/s",
         "bf16": "BF16", "fp4": "FP4", "sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp",
         "cuda": "CUDA", "cudagraph": "CUDA-graph", "nvml": "NVML", "swa": "SWA"}


class Label(NamedTuple):
    label: str
    description: str

    @property
    def sentence(self) -> str:
        """"Label: description", as `explain` and an editor's hover print it."""
        return f"{self.label}: {self.description}" if self.description else self.label


@functools.lru_cache(maxsize=4096)
def name_in_words(name: str) -> str:
    """`kv_bytes_per_gpu` -> "KV bytes per GPU": the label of a cell nobody labelled."""
    words = [WORDS.get(w, w) for w in name.replace(".", " ").split("_") for w in w.split()]
    text = " ".join(w for w in words if w)
    return text if words and words[0] in WORDS.values() else text[:1].upper() + text[1:]


def describe(cell) -> Label:
    """The label and description of a resolved cell (or a parsed `Cell`).

    The nearest definition that has a `##` label wins, so a user's override
    keeps the prelude's words; without one, the name in words and the comment.
    """
    definitions = _definitions(cell)
    for definition in definitions:
        if definition.label:
            return Label(definition.label, definition.description)
    doc = next((d.doc for d in definitions if d.doc), "")
    name = getattr(cell, "local_name", None) or definitions[0].name
    return Label(name_in_words(name), doc)


def is_labelled(cell) -> bool:
    """Whether some definition of the cell carries a `##` label."""
    return any(d.label for d in _definitions(cell))


def _definitions(cell) -> tuple:
    """A resolved cell's definitions, nearest first (a parsed `Cell` is its own only one)."""
    return (getattr(cell, "cell", cell),) + tuple(getattr(cell, "shadowed", ()))
