"""`kvdsl import`: a published Hugging Face config.json becomes a model spec.

The importer reads the config's facts (layers, heads, KV heads, head sizes,
MLA ranks, windows and layer patterns, state-space sizes, experts), counts the
parameters (`kvdsl.params`) and writes one `model` block whose every cell
names the config key it came from.  What it has to assume (a key left at the
library default, an unrecognised architecture) is reported as a warning and
written into the spec's header; `strict=True` turns each into an error.

What differs between architectures lives in one table, FAMILIES
(`kvdsl/hf_families.py`; the config is read by `kvdsl/hf_config.py`, the
spec written by `kvdsl/hf_spec.py`): a `Family`
row per `model_type` names its library defaults, how it lays out its layers,
which attention and MLP variants it uses, how its state-space layers are read
and where its experts sit.  The import code itself asks the row, never the
`model_type`, so a new family is one row (and perhaps one small rule function).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .errors import ConfigError, KvdslError, UsageError, raise_all
from .hf_config import DTYPES, MAX_NAME, Config, Findings, _Invalid, read_config, visible  # noqa: F401  (MAX_NAME, visible: as callers name them)
from .hf_families import ARCHITECTURES, FAMILIES, GENERIC, TEXT_MODEL_TYPES, Family, _weights_dtype  # noqa: F401
from .hf_files import HUB_ID, checkpoint_bytes, config_files, ignored_modules, kept_params, quantizer_config, verify  # noqa: F401
from .hf_spec import ImportedModel, block_name, check_options, prelude_blocks, published_name  # noqa: F401
from .params import Attention, Layer, Mlp, Shape, count_params, modules


def import_config(path: str, name: Optional[str] = None, title: Optional[str] = None, strict: bool = False) -> ImportedModel:
    """Read one config.json and return its model spec; raise every error found together."""
    check_options(name, title)
    findings = Findings(strict)
    root = read_config(path, findings)
    try:
        imported = _import(root, findings, name, title)
    except _Invalid:
        imported = None
    raise_all(findings.errors)
    assert imported is not None
    imported.assumptions = findings.assumptions
    return imported


WHOLE_NUMBER_KEYS = {  # key -> smallest sensible value; checked up front so every bad one is reported
    "num_hidden_layers": 1, "n_layer": 1, "hidden_size": 1, "num_attention_heads": 1, "n_head": 1,
    "num_key_value_heads": 1, "head_dim": 1, "intermediate_size": 1, "vocab_size": 1, "max_position_embeddings": 1,
    "sliding_window": 1, "kv_lora_rank": 1, "qk_rope_head_dim": 0, "qk_nope_head_dim": 1, "v_head_dim": 1,
    "q_lora_rank": 1, "moe_intermediate_size": 1, "num_experts": 0, "n_routed_experts": 0, "num_local_experts": 0,
    "num_experts_per_tok": 1, "top_k_experts": 1, "state_size": 1, "conv_kernel": 1, "ssm_state_size": 1,
    "index_head_dim": 1, "index_n_heads": 1, "index_topk": 1,
}


def _check_whole_numbers(config: Config) -> None:
    for key, minimum in WHOLE_NUMBER_KEYS.items():
        if config.has(key):
            try:
                config.whole(key, minimum)
            except _Invalid:
                pass
    if config.findings.errors:
        raise _Invalid


def _import(root: Config, findings: Findings, name: Optional[str], title: Optional[str]) -> ImportedModel:
    config, nested = _language_model(root)
    _check_whole_numbers(config)
    model_type = _model_type(root, config)
    repo, published = published_name(root)
    title = title or published
    known = FAMILIES.get(model_type)
    family = known or GENERIC
    config.family = family
    label = known.label if known else f"`{model_type}`" if model_type else "an unnamed architecture"
    out = ImportedModel(name or block_name(title), title, f"{repo} config.json ({Path(root.path).name})", label)
    out.hf_id = repo if HUB_ID.fullmatch(repo) else ""
    out.model_type = model_type or ""
    if nested:
        out.notes.append("The language model is read from `text_config`; the vision encoder is not counted in `params`.")
    mtp_key, mtp = next(((k, c.data[k]) for k in ("num_nextn_predict_layers", "mtp_num_hidden_layers") for c in (root, config)
                         if k in c.data), (None, None))
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        out.notes.append(f"The {mtp} multi-token-prediction layer(s) ({mtp_key}) are not counted: "
                         "serving loads them only for speculative decoding.")
    if known is None:
        what = f"model_type `{model_type}` is not one kvdsl knows" if model_type else "no `model_type` or known `architectures`"
        findings.assume(f"{what}: read as a generic decoder (num_hidden_layers, num_attention_heads, "
                        "num_key_value_heads, head_dim, hidden_size, intermediate_size)", root.span("model_type"))
    layers = config.integer("num_hidden_layers", "n_layer", "num_layers")
    hidden = config.integer("hidden_size", "d_model", "n_embd")
    kinds = _layer_kinds(config, family, layers, out)
    layer_shapes = _facts(config, family, layers, hidden, kinds, out)
    _weights_dtype(root, config, out)
    if known is None:
        _unread_keys(config)
    shape = Shape(config.integer("vocab_size"), hidden, _tied(root, config, family), layer_shapes, norm_bias=family.norm_bias)
    if shape.tied_embeddings:
        out.add("tie_word_embeddings", "true", "tie_word_embeddings: the LM head is the embedding matrix")
    out.params = count_params(shape)
    _params_cell(out, shape)
    _as_stored(root, shape, out)
    return out


UNQUANTIZED = ("bf16", "fp16", "fp32")


def _as_stored(root: Config, shape: Shape, out: ImportedModel) -> None:
    """What the files beside the config say of the weights: the modules a quantized checkpoint keeps in its
    unquantized dtype (besides the embeddings and LM head, which stay so anyway), and the bytes stored."""
    quant = root.data.get("quantization_config")
    if out.weight_dtype not in UNQUANTIZED and isinstance(quant, dict):
        patterns, where = ignored_modules(quant, quantizer_config(root.path))
        kept = kept_params(patterns, modules(shape)) if patterns else 0
        if kept:
            out.add("unquantized_params", kept, f"{where}: {', '.join(patterns)}")
    stored = checkpoint_bytes(root.path)
    if stored is not None:
        out.add("checkpoint_bytes", f"{stored[0]} B", stored[1])


ARCHITECTURE_WORDS = re.compile(r"layer|head|expert|window|kv|lora|state|ssm|mamba|conv|attention|attn|pattern|group|chunk|block")
NOT_ARCHITECTURE = re.compile(r"dropout|norm|eps|init|act|scal|rope|softcap|aux|coef|loss|range|std|implementation|_id$|cache|bias|"
                              r"time_step|residual|limit|logit|topk|top_k|n_group|plan|multiplier")


def _unread_keys(config: Config) -> None:
    """A generic read can miss what a new architecture does: name the keys that look like it matters."""
    unread = [k for k in config.data if k not in config.read and ARCHITECTURE_WORDS.search(k) and not NOT_ARCHITECTURE.search(k)]
    if unread:
        names = ", ".join(f"`{config.name(k)}`" for k in unread)
        config.findings.assume(f"kvdsl did not read {names}: if these change what the layers cache, the spec does not show it",
                               config.span(unread[0]))


def _language_model(root: Config) -> tuple[Config, bool]:
    if isinstance(root.data.get("text_config"), dict):
        return root.child("text_config"), True
    return root, False


def _model_type(root: Config, config: Config) -> Optional[str]:
    model_type = config.string("model_type") or root.string("model_type")
    if config is not root:
        model_type = TEXT_MODEL_TYPES.get(model_type, model_type)
    if model_type in FAMILIES:
        return model_type
    architectures = root.items("architectures", str) or []
    for arch in architectures:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    return model_type


def _tied(root: Config, config: Config, family: Family) -> bool:
    for c in (config, root):
        if c.has("tie_word_embeddings"):
            return c.flag("tie_word_embeddings", False)
    return family.tied


# -- layer kinds ------------------------------------------------------------

LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "ssm", "mamba": "ssm",
               "attention": "full", "chunked_attention": "full"}


def _layer_kinds(config: Config, family: Family, layers: int, out: ImportedModel) -> list[str]:
    """One kind per layer: `full`, `sliding`, `ssm` or `mlp`; sets `window` on `out` when there is one."""
    if config.has("layer_types"):
        kinds, source = _listed_layer_types(config, layers), "layer_types"
    else:
        kinds, source = family.layer_kinds(config, layers)
    window = None
    if "sliding" in kinds:
        window = config.integer("sliding_window", "sliding_window_size", "attention_window_size")
        out.notes.append(f"Layers: {source}; window {window:,} tokens.")
    elif source:
        out.notes.append(f"Layers: {source}.")
    out.window = window
    return kinds


def _listed_layer_types(config: Config, layers: int) -> list[str]:
    """`layer_types`, one name per layer, as the config lists them."""
    names = config.items("layer_types", str)
    unknown = sorted({n for n in names if n not in LAYER_TYPES})
    if unknown:
        config.findings.error(f"`{config.name('layer_types')}` has layer types kvdsl does not know: {', '.join(unknown)}",
                              config.span("layer_types"), hint="known: " + ", ".join(sorted(LAYER_TYPES)))
        raise _Invalid
    if len(names) != layers:
        config.findings.error(f"`{config.name('layer_types')}` lists {len(names)} layers but `num_hidden_layers` is {layers}",
                              config.span("layer_types"))
        raise _Invalid
    return [LAYER_TYPES[n] for n in names]


def layer_pattern(kinds: list[str], window: Optional[int]) -> str:
    """A compact kvspec pattern: `[sliding(128), full] * 12`, `[[sliding(1024)] * 5, full] * 10 + [sliding(1024)] * 2`."""
    words = [f"sliding({window})" if k == "sliding" else k for k in kinds]
    n = len(words)
    for period in range(1, n + 1):
        unit = words[:period]
        repeats = n // period
        rest = words[repeats * period:]
        if (repeats >= 2 or period == n) and words[: repeats * period] == unit * repeats and rest == unit[: len(rest)]:
            break
    terms = [_runs(unit, repeats)]
    if rest:
        terms.append(_runs(rest, 1))
    return " + ".join(terms)


def _runs(words: list[str], repeats: int) -> str:
    groups: list[tuple[str, int]] = []
    for w in words:
        if groups and groups[-1][0] == w:
            groups[-1] = (w, groups[-1][1] + 1)
        else:
            groups.append((w, 1))
    if len(groups) == 1:
        word, count = groups[0]
        return f"[{word}] * {count * repeats}" if count * repeats > 1 else f"[{word}]"
    if repeats > 1:
        inner = ", ".join(w if c == 1 else f"[{w}] * {c}" for w, c in groups)
        return f"[{inner}] * {repeats}"
    terms, singles = [], []
    for w, c in groups:  # no repetition: a sum of runs, singles listed together
        if c == 1:
            singles.append(w)
            continue
        if singles:
            terms.append(f"[{', '.join(singles)}]")
            singles = []
        terms.append(f"[{w}] * {c}")
    if singles:
        terms.append(f"[{', '.join(singles)}]")
    return " + ".join(terms)


# -- the facts ----------------------------------------------------------------

def _facts(config: Config, family: Family, layers: int, hidden: int, kinds: list[str], out: ImportedModel) -> list[Layer]:
    """Write the shape cells onto `out` and return the layers for the parameter count."""
    counts = {k: kinds.count(k) for k in ("full", "sliding", "ssm", "mlp")}
    if counts["full"] == layers:
        out.add("layers", layers, config.cite("num_hidden_layers"))
    else:
        out.add("layer_kinds", layer_pattern(kinds, out.window), _kinds_comment(counts, out.window))
        out.add("layers", layers, f"{config.cite('num_hidden_layers')} (checked against the pattern)")
    attention = None
    if counts["full"] + counts["sliding"]:
        attention = _attention(config, family, hidden, out)
    else:
        out.add("heads", 0, "no attention layers")
        out.add("kv_heads", 0)
        out.add("head_dim", 0)
    ssm = family.state_space(config, hidden, out) if counts["ssm"] else None
    if ssm is not None:
        _ssm_state_dtype(config, family, out)
    context = config.integer("max_position_embeddings", "n_positions", "max_sequence_length", required=False)
    if context is not None:
        out.add("context_limit", context, config.cite("max_position_embeddings"))
    elif counts["ssm"] == layers:
        config.findings.assume("`max_position_embeddings` is not set: a state-space model has no position limit; "
                               "context_limit = 1M", config.span())
        out.add("context_limit", "1M", "assumed: no position limit")
    else:
        config.findings.assume("`max_position_embeddings` is not set: context_limit stays at kvdsl's default (128K)", config.span())
    out.add("hidden_size", hidden, config.cite("hidden_size"))
    out.add("vocab_size", config.integer("vocab_size"), config.cite("vocab_size"))
    mlps = _mlps(config, family, layers, hidden, kinds, out)
    norms = family.norms(config) if callable(family.norms) else family.norms
    mixers = {"full": attention, "sliding": attention, "ssm": ssm, "mlp": None}
    return [Layer(mixers[kind], mlp, norms) for kind, mlp in zip(kinds, mlps)]


def _ssm_state_dtype(config: Config, family: Family, out: ImportedModel) -> None:
    """`ssm_state_dtype`: the recurrent state's dtype when the config (or the family's serving default) names one."""
    key = config.first(*family.ssm_dtype_keys) if family.ssm_dtype_keys else None
    if key is not None:
        name = config.string(key)
        dtype = DTYPES.get(name)
        if dtype is None:
            config.findings.assume(f"`{config.name(key)}` `{name}` is not a dtype kvdsl knows: the state stays in the model's dtype",
                                   config.span(key))
            return
        out.add("ssm_state_dtype", dtype, config.cite(key))
    elif family.ssm_dtype_default is not None:
        dtype, why = family.ssm_dtype_default
        out.add("ssm_state_dtype", dtype, why)


def _kinds_comment(counts: dict, window: Optional[int]) -> str:
    parts = [f"{counts['full']} full"] if counts["full"] else []
    if counts["sliding"]:
        parts.append(f"{counts['sliding']} sliding ({window:,})")
    if counts["ssm"]:
        parts.append(f"{counts['ssm']} state-space")
    if counts["mlp"]:
        parts.append(f"{counts['mlp']} MLP-only")
    return ", ".join(parts)


def _attention(config: Config, family: Family, hidden: int, out: ImportedModel) -> Attention:
    heads = config.integer("num_attention_heads", "n_head", "num_heads")
    out.add("heads", heads, config.cite("num_attention_heads"))
    if family.mla or config.has("kv_lora_rank"):
        return _mla(config, heads, hidden, out)
    kv_heads, kv_comment = family.kv_heads(config, heads)
    out.add("kv_heads", kv_heads, kv_comment)
    head_dim, comment = _head_dim(config, heads, hidden)
    out.add("head_dim", head_dim, comment)
    if kv_heads > heads or heads % kv_heads:
        config.findings.error(f"`{config.name('num_attention_heads')}` {heads} is not a multiple of the {kv_heads} KV heads",
                              config.span("num_key_value_heads"))
        raise _Invalid
    bias = config.flag("attention_bias", family.attention_bias) or config.flag("bias", False)
    qkv_bias = bias or family.qkv_bias or config.flag("qkv_bias", False)
    qk_norm = family.qk_norm or config.flag("use_qk_norm", False)
    return Attention(heads, kv_heads, head_dim, qkv_bias=qkv_bias, o_bias=bias and family.o_bias, qk_norm=qk_norm,
                     sinks=family.sinks, gated_query=family.gated_query)


def _head_dim(config: Config, heads: int, hidden: int) -> tuple[int, str]:
    """`head_dim` when the config (or its library) sets it, else `attention_head_dim`, else hidden / heads."""
    if config.has("head_dim") or config.default("head_dim") is not None:
        head_dim = config.integer("head_dim")
        return head_dim, config.cite("head_dim") + (" (explicit)" if config.has("head_dim") and head_dim * heads != hidden else "")
    if config.has("attention_head_dim"):
        return config.integer("attention_head_dim"), config.name("attention_head_dim")
    if hidden % heads:
        config.findings.error(f"`{config.name('hidden_size')}` {hidden} is not a multiple of `{config.name('num_attention_heads')}` {heads}, "
                              "and `head_dim` is not given", config.span("hidden_size"))
        raise _Invalid
    return hidden // heads, f"hidden_size / num_attention_heads = {hidden} / {heads}"


def _mla(config: Config, heads: int, hidden: int, out: ImportedModel) -> Attention:
    kv_heads = config.integer("num_key_value_heads", required=False) or heads
    out.add("kv_heads", kv_heads, f"{config.cite('num_key_value_heads')}: not what MLA caches, unused")
    nope = config.integer("qk_nope_head_dim")
    rope = config.integer("qk_rope_head_dim")
    rank = config.integer("kv_lora_rank")
    out.add("head_dim", nope, f"{config.cite('qk_nope_head_dim')}, for the MHA comparison")
    out.add("kv_lora_rank", rank, config.cite("kv_lora_rank"))
    out.add("rope_head_dim", rope, config.cite("qk_rope_head_dim"))
    out.notes.append(f"MLA: each layer caches one {rank}-element latent plus a {rope}-element RoPE key per token "
                     f"({rank + rope} elements, no factor 2); num_key_value_heads ({kv_heads}) is not what it caches.")
    q_rank = config.integer("q_lora_rank", required=False) or 0
    if q_rank:
        out.add("q_lora_rank", q_rank, config.cite("q_lora_rank"))
    v_head = config.integer("v_head_dim", required=False) or nope
    index_dim, index_heads = _indexer(config, out)
    return Attention(heads, kv_heads, nope, v_head_dim=v_head, kv_lora_rank=rank, q_lora_rank=q_rank,
                     qk_nope_head_dim=nope, qk_rope_head_dim=rope, index_n_heads=index_heads, index_head_dim=index_dim)


def _indexer(config: Config, out: ImportedModel) -> tuple[int, int]:
    """DeepSeek sparse attention: the indexer's key size and heads, 0 without one."""
    if not config.has("index_head_dim"):
        return 0, 0
    dim = config.integer("index_head_dim")
    heads = config.integer("index_n_heads")
    topk = config.integer("index_topk")
    out.add("index_head_dim", dim, config.cite("index_head_dim"))
    out.add("index_topk", topk, config.cite("index_topk"))
    out.notes.append(f"Sparse attention: each layer also caches the indexer's {dim}-element FP8 key and its FP32 scales "
                     f"per token; each query attends to {topk} tokens.")
    return dim, heads


def _mlps(config: Config, family: Family, layers: int, hidden: int, kinds: list[str], out: ImportedModel) -> list[Optional[Mlp]]:
    """Each layer's MLP, dense or MoE, and the cells that describe them."""
    if family.mlp_layers == "none":
        return [None] * layers
    has_mlp = [kind == "mlp" for kind in kinds] if family.mlp_layers == "own" else [True] * layers
    experts_key = config.first("n_routed_experts", "num_local_experts", "num_experts")
    experts = config.integer(experts_key, minimum=0) if experts_key else 0
    is_moe = [family.moe_layer(config, i) for i in range(layers)] if experts else [False] * layers
    needs_dense = not experts or any(mlp and not moe for mlp, moe in zip(has_mlp, is_moe))
    dense = family.dense_mlp(config, hidden, family.gated_mlp, out) if needs_dense else None
    moe = _moe(config, family, experts, experts_key, out) if experts else None
    return [(moe if layer_moe else dense) if mlp else None for mlp, layer_moe in zip(has_mlp, is_moe)]


def _moe(config: Config, family: Family, experts: int, experts_key: str, out: ImportedModel) -> Mlp:
    active = config.integer("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk", "top_k_experts")
    key = config.first("moe_intermediate_size", "expert_intermediate_size") or family.expert_size_key
    inner = config.integer(key)
    out.add("experts", experts, config.cite(experts_key))
    out.add("experts_per_token", active, config.cite(config.first("num_experts_per_tok", "experts_per_token", "top_k_experts") or
                                                     "num_experts_per_tok"))
    out.add("expert_intermediate_size", inner, config.cite(key))
    shared = 0
    if config.has("n_shared_experts"):
        count = config.integer("n_shared_experts", minimum=0)
        shared = count * inner
        if count:
            out.add("shared_experts", count, config.cite("n_shared_experts"))
    elif config.has("shared_expert_intermediate_size"):
        shared = config.integer("shared_expert_intermediate_size", minimum=0)
        out.add("shared_expert_intermediate_size", shared, config.cite("shared_expert_intermediate_size"))
    router_bias = family.router_bias or config.string("topk_method") == "noaux_tc"
    return Mlp(inner, gated=family.gated_mlp, experts=experts, shared_intermediate=shared, active_experts=active,
               shared_gate=family.shared_gate and shared > 0, router_bias=router_bias, expert_bias=family.expert_bias)


# -- weights --------------------------------------------------------------------


def _params_cell(out: ImportedModel, shape: Shape) -> None:
    p = out.params
    head = "tied" if shape.tied_embeddings else f"lm_head {p.head:,}"
    out.notes.append(f"Parameters counted from the config: embeddings {p.embeddings:,} + layers {p.layers:,} "
                     f"+ final norm {p.norm:,} + {head} = {p.total:,} ({p.total / 1e9:.2f}B).")
    out.add("params", p.total, "total parameters, counted from the config (see above)")
    if p.active != p.total:
        out.add("active_params", p.active, "parameters one token uses: the routed experts it is sent to, not every expert")
    out.add("weight_dtype", out.weight_dtype, out.weight_comment)
    if out.expert_dtype:
        out.add("expert_params", p.expert_weights, "routed-expert weight matrices")
        out.add("expert_weight_dtype", out.expert_dtype, "quantization_config: MXFP4")


# ---------------------------------------------------------------- many files

def import_each(files: list[str], name: Optional[str] = None, title: Optional[str] = None,
                strict: bool = False) -> tuple[list[ImportedModel], list]:
    """Import every file: the models that import and check, and (file, error) for each that does not; a second
    model of one name is an error of its file."""
    models: list[ImportedModel] = []
    failed: list = []
    for path in files:
        try:
            model = import_config(path, name, title, strict)
            clash = next((m for m in models if m.name == model.name), None)
            if clash is not None:
                raise ConfigError(f"`{model.source}` and `{clash.source}` would both be model `{model.name}`")
            verify([model])
        except UsageError:
            raise
        except KvdslError as exc:
            failed.append((path, exc))
            continue
        models.append(model)
    return models, failed


def import_all(files: list[str], name: Optional[str] = None, title: Optional[str] = None,
               strict: bool = False) -> list[ImportedModel]:
    """Import every file; raise all their errors together."""
    models, failed = import_each(files, name, title, strict)
    raise_all([error for _, exc in failed for error in (exc.errors if hasattr(exc, "errors") else [exc])])
    return models
