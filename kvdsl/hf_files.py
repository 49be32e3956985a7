"""The files `kvdsl import` reads beside a config.json, and the sources it takes.

A source is a config.json, a folder of them, or a Hugging Face id (`ORG/NAME`)
whose snapshot the hub's client already downloaded: the local hub cache is
read, nothing is fetched.  Beside a config the importer reads the weights as
the checkpoint stores them (`model.safetensors.index.json`'s
`metadata.total_size`, or a single `model.safetensors`'s header) and a
quantizer's own config (`hf_quant_config.json`), whose excluded modules stay
in the checkpoint's unquantized dtype.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Optional

from .errors import ConfigError, KvdslError, UsageError
from .hf_config import visible

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


# ---------------------------------------------------------------- sources

def hub_cache() -> Path:
    """The hub cache the Hugging Face client writes: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = Path(os.environ["XDG_CACHE_HOME"]).expanduser() if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "huggingface" / "hub"


def cached_snapshot(repo: str) -> Optional[Path]:
    """The snapshot folder of `repo` in the hub cache that holds a config.json: the one `refs/main` names, else the newest."""
    folder = hub_cache() / ("models--" + repo.replace("/", "--"))
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    try:
        named = snapshots / ref.read_text().strip() if ref.is_file() else None
        if named is not None and (named / "config.json").is_file():
            return named
        found = [p for p in snapshots.iterdir() if (p / "config.json").is_file()] if snapshots.is_dir() else []
    except OSError:
        return None
    return max(found, key=lambda p: (p / "config.json").stat().st_mtime) if found else None


def config_files(source: str) -> list[str]:
    """The config.json files a source names: the file itself, every `*.json` in a folder, or a cached hub snapshot's."""
    path = Path(source)
    try:
        info = path.stat()
    except FileNotFoundError:
        if HUB_ID.fullmatch(source) and not source.endswith(".json"):
            snapshot = cached_snapshot(source)
            if snapshot is not None:
                return [str(snapshot / "config.json")]
        raise _not_found(source) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read `{visible(source)}`: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        try:
            os.listdir(path)
        except OSError as exc:
            raise UsageError(f"cannot read `{visible(source)}`: {exc.strerror or exc}") from None
        files = sorted(str(p) for p in path.glob("*.json") if p.is_file() and not _beside_a_config(p))
        if not files:
            raise UsageError(f"`{visible(source)}` holds no .json files")
        return files
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"cannot read `{visible(source)}`: not a regular file; pass a config.json or a folder of them")
    return [source]


# the files a checkpoint keeps beside its config.json, which a folder import does not take for configs
BESIDE = ("model.safetensors.index.json", "hf_quant_config.json", "generation_config.json", "tokenizer.json",
          "tokenizer_config.json", "special_tokens_map.json", "preprocessor_config.json")


def _beside_a_config(path: Path) -> bool:
    return path.name in BESIDE and (path.parent / "config.json").is_file()


def _not_found(source: str) -> UsageError:
    if HUB_ID.fullmatch(source) and not source.endswith(".json"):
        return UsageError(f"`{source}` is not a file or folder here, nor in the Hugging Face hub cache {visible(str(hub_cache()))}",
                          hint=f"kvdsl does not fetch models: download it first (huggingface-cli download {source} config.json "
                               "model.safetensors.index.json), or pass its config.json")
    return UsageError(f"cannot read `{visible(source)}`: not found")


# ---------------------------------------------------------------- beside the config

def checkpoint_bytes(config_path: str) -> Optional[tuple[int, str]]:
    """The weights as the checkpoint stores them, and where that was read: the index's `metadata.total_size`,
    else the tensors of a single `model.safetensors` (its size less the 8-byte length and the JSON header)."""
    folder = Path(config_path).parent
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        except (OSError, ValueError, AttributeError):
            total = None
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            return total, "model.safetensors.index.json metadata.total_size"
        raise ConfigError(f"`{visible(str(index))}` has no `metadata.total_size` of the weights' bytes")
    single = folder / "model.safetensors"
    if single.is_file():
        try:
            with open(single, "rb") as stream:
                header = int.from_bytes(stream.read(8), "little")
            size = single.stat().st_size
        except OSError:
            return None
        if 0 < header < size - 8:
            return size - 8 - header, "model.safetensors, less its header"
    return None


def quantizer_config(config_path: str) -> Optional[dict]:
    """TensorRT Model Optimizer's `hf_quant_config.json` beside the config, when there is one."""
    path = Path(config_path).parent / "hf_quant_config.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ConfigError(f"`{visible(str(path))}` is not valid JSON") from None
    return data.get("quantization") if isinstance(data, dict) and isinstance(data.get("quantization"), dict) else None


# the keys under which quantizers list the modules they leave unquantized: compressed-tensors and modelopt's
# `ignore`, modelopt's `exclude_modules`, the fp8/AWQ/GPTQ/bitsandbytes `modules_to_not_convert`
IGNORE_KEYS = ("ignore", "exclude_modules", "modules_to_not_convert", "ignored_layers")


def ignored_modules(quant: dict, beside: Optional[dict]) -> tuple[list[str], str]:
    """The module patterns a quantized checkpoint keeps unquantized, and the key that lists them."""
    for holder, where in ((quant, "quantization_config"), (beside or {}, "hf_quant_config.json quantization")):
        for key in IGNORE_KEYS:
            names = holder.get(key)
            if isinstance(names, list) and all(isinstance(n, str) for n in names) and names:
                return names, f"{where}.{key}"
    return [], ""


def matches(pattern: str, module: str) -> bool:
    """Whether a quantizer's pattern names `module` (or a module that holds it): `re:` a regular expression,
    a pattern with `*` a glob, else a name the module's ends with or, as transformers reads
    `modules_to_not_convert`, a part of its name."""
    from fnmatch import fnmatchcase

    pattern = re.sub(r"^(backbone|model\.language_model|language_model\.model|language_model)\.", "model.", pattern)
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], module) is not None
        except re.error:
            return False
    if "*" in pattern or "?" in pattern:
        return fnmatchcase(module, pattern) or fnmatchcase(module, pattern + ".*")
    return module == pattern or pattern in module.split(".") or f".{pattern}." in f".{module}."


def kept_params(patterns: list[str], modules: list[tuple[str, int, list]]) -> int:
    """The parameters of the modules the patterns name, each counted once (a named module's parts are in it)."""
    total = 0
    for name, count, parts in modules:
        if any(matches(p, name) for p in patterns):
            total += count
        else:
            total += kept_params(patterns, parts)
    return total


# ---------------------------------------------------------------- many files

def verify(models: list) -> None:
    """Every imported spec must pass `kvdsl check` and evaluate: its text loaded as the user will load it
    (from memory, as if each were `NAME.kvspec` here; nothing is written)."""
    from .api import evaluate_paths
    from .loader import overlaid

    texts = {Path.cwd() / f"{model.name}.kvspec": model.render() for model in models}
    with overlaid(texts):
        try:
            evaluate_paths([str(path) for path in texts])
        except KvdslError as exc:
            raise ConfigError("the imported spec does not evaluate:\n" + exc.render()) from None
