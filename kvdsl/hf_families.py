"""What differs between architectures: the family rules, the FAMILIES table, and the weights' formats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

from .hf_config import DTYPES, Config, _Invalid, _shown
from .hf_spec import ImportedModel
from .params import Mlp, StateSpace


#
# What a family's library code does that its config.json does not say, as small
# functions a row of FAMILIES names.  Each reads the config through `Config`, so
# a missing or junk key is reported at its place like any other.

def window_on_every_layer(config: Config, layers: int) -> tuple[list[str], str]:
    """Mistral-style: a `sliding_window` applies to every layer."""
    if not config.has("sliding_window"):
        return ["full"] * layers, ""
    return ["sliding"] * layers, "`sliding_window` on every layer"


def qwen_windows(config: Config, layers: int) -> tuple[list[str], str]:
    """Qwen: a window only when `use_sliding_window`, on the layers from `max_window_layers` up."""
    if not config.has("sliding_window"):
        return ["full"] * layers, ""
    if not config.flag("use_sliding_window", False):
        return ["full"] * layers, "`sliding_window` is set but `use_sliding_window` is false: no window applies"
    first = config.integer("max_window_layers", minimum=0, required=False)
    first = layers if first is None else min(first, layers)
    return ["full"] * first + ["sliding"] * (layers - first), f"full attention below max_window_layers ({first}), sliding above"


def gemma2_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Gemma 2: local (sliding) and global layers alternate, a local one first."""
    kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    return kinds, "Gemma 2 alternates local (sliding) and global layers, starting with a local one (set by the model code)"


def gemma3_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Gemma 3: every `sliding_window_pattern`th layer global, the others local."""
    pattern = config.integer("sliding_window_pattern")
    kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    return kinds, f"Gemma 3: every {pattern}th layer global, the others local (sliding_window_pattern {pattern})"


def all_state_space(config: Config, layers: int) -> tuple[list[str], str]:
    """Mamba, Mamba-2: no attention at all."""
    return ["ssm"] * layers, "every layer a state-space (Mamba) layer"


def jamba_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Jamba: attention where layer % `attn_layer_period` == `attn_layer_offset`, Mamba elsewhere."""
    period, offset = config.integer("attn_layer_period"), config.integer("attn_layer_offset", minimum=0)
    kinds = ["full" if i % period == offset else "ssm" for i in range(layers)]
    return kinds, f"attention where layer % attn_layer_period ({period}) == attn_layer_offset ({offset}), Mamba elsewhere"


NEMOTRON_LAYERS = {"M": "ssm", "*": "full", "-": "mlp", "E": "mlp"}


def nemotron_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Nemotron-H spells its layers out: `hybrid_override_pattern`, one character per layer."""
    pattern = config.string("hybrid_override_pattern")
    if pattern is None:
        config.findings.error(f"`{config.name('hybrid_override_pattern')}` is missing: it says which layers are Mamba and which attention",
                              config.span())
        raise _Invalid
    bad = sorted(set(pattern) - set(NEMOTRON_LAYERS))
    if bad or len(pattern) != layers:
        problem = f"has characters kvdsl does not know: {' '.join(bad)}" if bad else f"has {len(pattern)} layers but `num_hidden_layers` is {layers}"
        config.findings.error(f"`{config.name('hybrid_override_pattern')}` {problem}", config.span("hybrid_override_pattern"))
        raise _Invalid
    return [NEMOTRON_LAYERS[ch] for ch in pattern], "hybrid_override_pattern (M = Mamba-2, * = attention, - = MLP, E = MoE)"


def qwen3_next_layers(config: Config, layers: int) -> tuple[list[str], str]:
    """Qwen3-Next: every `full_attention_interval`th layer full attention, gated delta-net between."""
    interval = config.integer("full_attention_interval")
    kinds = ["full" if (i + 1) % interval == 0 else "ssm" for i in range(layers)]
    return kinds, f"every {interval}th layer full attention, the others gated delta-net (linear attention)"


def kv_heads_from_keys(config: Config, heads: int) -> tuple[int, str]:
    """`num_key_value_heads` or an alias; without one, multi-head attention (said as an assumption)."""
    key = config.first("num_key_value_heads", "num_kv_heads", "n_head_kv")
    if key is None and config.default("num_key_value_heads") is not None:
        return config.integer("num_key_value_heads"), config.cite("num_key_value_heads")
    if key is None:
        config.findings.assume(f"`{config.name('num_key_value_heads')}` is not set: multi-head attention, one KV head per query head",
                               config.span())
        return heads, "assumed MHA: num_key_value_heads not set"
    return config.integer(key), config.name(key)


def falcon_kv_heads(config: Config, heads: int) -> tuple[int, str]:
    """Falcon: `multi_query` (one KV head) unless `new_decoder_architecture` names its KV heads."""
    if config.flag("new_decoder_architecture", False):
        return config.integer("num_kv_heads", "n_head_kv"), f"{config.name('num_kv_heads')} (new_decoder_architecture)"
    if config.flag("multi_query", True):
        return 1, "multi_query: one KV head"
    return heads, "multi_query false: one KV head per query head"


def falcon_norms(config: Config) -> int:
    """Falcon's old layers share one norm between parallel attention and MLP."""
    if config.flag("new_decoder_architecture", False):
        return 2
    return 1 if config.flag("parallel_attn", True) else 2


def mamba_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Mamba-1: an inner size (`intermediate_size`, or `expand` x hidden), a state size and a conv kernel."""
    state = config.integer("state_size", "ssm_state_size", "d_state")
    kernel = config.integer("conv_kernel", "d_conv")
    if config.has("intermediate_size"):
        inner = config.integer("intermediate_size")
        comment = config.name("intermediate_size") + (f" (expand {config.data['expand']} x hidden_size {hidden})" if config.has("expand") else "")
    else:
        expand = config.integer("expand")
        inner, comment = expand * hidden, f"expand {expand} x hidden_size {hidden}"
    out.add("ssm_inner", inner, comment)
    out.add("ssm_state_size", state, config.cite("state_size"))
    out.add("ssm_conv_kernel", kernel, config.cite("conv_kernel"))
    dt_rank = config.integer("time_step_rank", required=False) or -(-hidden // 16)
    return StateSpace("mamba", inner, state, kernel, dt_rank=dt_rank, conv_bias=config.flag("use_conv_bias", True),
                      proj_bias=config.flag("use_bias", False))


def mamba2_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Mamba-2 (and Nemotron-H's Mamba layers): heads x head size, with B and C convolved per group."""
    state = config.integer("state_size", "ssm_state_size", "d_state")
    kernel = config.integer("conv_kernel", "d_conv")
    heads = config.integer("mamba_num_heads", "num_heads")
    head_dim = config.integer("mamba_head_dim", "head_dim")
    groups = config.integer("n_groups")
    inner = heads * head_dim
    out.add("ssm_inner", inner, f"Mamba-2 heads {heads} x head dim {head_dim}")
    out.add("ssm_state_size", state, config.cite(config.first("ssm_state_size", "state_size") or "state_size"))
    out.add("ssm_conv_kernel", kernel, config.cite("conv_kernel"))
    out.add("ssm_conv_channels", inner + 2 * groups * state, f"ssm_inner + 2 x n_groups {groups} x state size (B and C)")
    chunk_key = config.first("mamba_chunk_size", "chunk_size")
    if chunk_key is not None:
        out.add("ssm_chunk_size", config.integer(chunk_key), config.cite(chunk_key))
    return StateSpace("mamba2", inner, state, kernel, heads=heads, groups=groups, conv_bias=config.flag("use_conv_bias", True),
                      proj_bias=config.flag("use_bias", False))


def jamba_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Jamba's Mamba-1 layers, under `mamba_`-prefixed keys."""
    expand, state, kernel = config.integer("mamba_expand"), config.integer("mamba_d_state"), config.integer("mamba_d_conv")
    inner = expand * hidden
    out.add("ssm_inner", inner, f"mamba_expand {expand} x hidden_size {hidden}")
    out.add("ssm_state_size", state, config.cite("mamba_d_state"))
    out.add("ssm_conv_kernel", kernel, config.cite("mamba_d_conv"))
    dt_rank = config.integer("mamba_dt_rank", required=False) or -(-hidden // 16)
    return StateSpace("mamba", inner, state, kernel, dt_rank=dt_rank, conv_bias=config.flag("mamba_conv_bias", True),
                      proj_bias=config.flag("mamba_proj_bias", False), inner_norms=True)


def gated_deltanet_state(config: Config, hidden: int, out: ImportedModel) -> StateSpace:
    """Qwen3-Next's linear attention: a value x key state per value head, and a conv over q, k and v."""
    v_heads, k_heads = config.integer("linear_num_value_heads"), config.integer("linear_num_key_heads")
    k_dim, v_dim = config.integer("linear_key_head_dim"), config.integer("linear_value_head_dim")
    kernel = config.integer("linear_conv_kernel_dim")
    inner = v_heads * v_dim
    out.add("ssm_inner", inner, f"linear_num_value_heads {v_heads} x linear_value_head_dim {v_dim}")
    out.add("ssm_state_size", k_dim, "linear_key_head_dim: the delta-net state is value x key per head")
    out.add("ssm_conv_kernel", kernel, config.cite("linear_conv_kernel_dim"))
    out.add("ssm_conv_channels", 2 * k_heads * k_dim + inner, "queries and keys (2 x linear_num_key_heads x linear_key_head_dim) plus values")
    return StateSpace("gated_deltanet", inner, k_dim, kernel, heads=v_heads, key_heads=k_heads)


def dense_mlp_from_keys(config: Config, hidden: int, gated: bool, out: ImportedModel) -> Mlp:
    """A dense MLP of `intermediate_size` (or `ffn_hidden_size`)."""
    key = config.first("intermediate_size", "ffn_hidden_size")
    inner = config.integer(key or "intermediate_size")
    out.add("intermediate_size", inner, config.cite(key or "intermediate_size"))
    return Mlp(inner, gated=gated, bias=config.flag("mlp_bias", False))


def falcon_mlp(config: Config, hidden: int, gated: bool, out: ImportedModel) -> Mlp:
    """Falcon's MLP: one up projection of `ffn_hidden_size` (4 x hidden by default), no gate."""
    inner = config.integer("ffn_hidden_size", required=False) or 4 * hidden
    out.add("intermediate_size", inner, "ffn_hidden_size (4 x hidden_size when absent)")
    return Mlp(inner, gated=False, bias=config.flag("bias", False))


def every_layer(config: Config, i: int) -> bool:
    """Mixtral, gpt-oss and most MoE families: every layer's MLP is the experts."""
    return True


def after_first_dense(config: Config, i: int) -> bool:
    """DeepSeek, GLM: the first `first_k_dense_replace` layers dense, then every `moe_layer_freq`th MoE."""
    first_dense = config.integer("first_k_dense_replace", minimum=0, required=False) or 0
    freq = config.integer("moe_layer_freq", required=False) or 1
    return i >= first_dense and i % freq == 0


def every_sparse_step(config: Config, i: int) -> bool:
    """Qwen MoE: every `decoder_sparse_step`th layer, except the `mlp_only_layers`."""
    step = config.integer("decoder_sparse_step", required=False) or 1
    return i not in (config.items("mlp_only_layers", int) or []) and (i + 1) % step == 0


def jamba_experts(config: Config, i: int) -> bool:
    """Jamba: experts where layer % `expert_layer_period` == `expert_layer_offset`."""
    return i % config.integer("expert_layer_period") == config.integer("expert_layer_offset", minimum=0)


def nemotron_experts(config: Config, i: int) -> bool:
    """Nemotron-H: the layers `hybrid_override_pattern` marks `E` (every MLP layer when `layer_types` lists them instead)."""
    pattern = config.data.get("hybrid_override_pattern")
    return not isinstance(pattern, str) or i >= len(pattern) or pattern[i] == "E"


# ---------------------------------------------------------------- families

@dataclass(frozen=True)
class Family:
    """What kvdsl knows of one `model_type`: its library's defaults and the rules its model code follows.

    A field left out is the generic decoder's rule, so a row of FAMILIES states only what
    sets the family apart.  The hooks are the functions above.
    """

    label: str
    defaults: tuple = ()          # (key, value) the library uses when the key is absent
    tied: bool = False            # tie_word_embeddings when the config leaves it out
    # layers
    layer_kinds: Callable[[Config, int], tuple[list[str], str]] = window_on_every_layer   # unless `layer_types` lists them
    norms: Union[int, Callable[[Config], int]] = 2                                      # hidden-size norms per layer
    norm_bias: bool = False
    # attention
    mla: bool = False             # multi-head latent attention, whether or not `kv_lora_rank` is set
    kv_heads: Callable[[Config, int], tuple[int, str]] = kv_heads_from_keys
    attention_bias: bool = False  # `attention_bias` when the config leaves it out
    qkv_bias: bool = False        # q, k and v carry a bias whatever the config says
    o_bias: bool = True           # the output projection has a bias when the attention has
    qk_norm: bool = False
    sinks: bool = False
    gated_query: bool = False
    # state-space (and linear-attention) layers
    state_space: Callable[[Config, int, "ImportedModel"], StateSpace] = mamba_state
    ssm_dtype_keys: tuple = ()    # config keys naming the recurrent state's dtype (mamba_ssm_dtype)
    ssm_dtype_default: Optional[tuple[str, str]] = None   # (dtype, why) when none of them is set
    # MLPs
    mlp_layers: str = "all"       # which layers have an MLP: "all", "none", or "own" (the layers of kind `mlp`)
    dense_mlp: Callable[[Config, int, bool, "ImportedModel"], Mlp] = dense_mlp_from_keys
    gated_mlp: bool = True
    moe_layer: Callable[[Config, int], bool] = every_layer   # with experts: is layer i an MoE layer
    expert_size_key: str = "moe_intermediate_size"           # the experts' size when no expert key is set
    shared_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False


GENERIC = Family("generic decoder")

GEMMA3_TEXT_DEFAULTS = (
    ("vocab_size", 262208), ("hidden_size", 2304), ("intermediate_size", 9216), ("num_hidden_layers", 26),
    ("num_attention_heads", 8), ("num_key_value_heads", 4), ("head_dim", 256), ("max_position_embeddings", 131072),
    ("sliding_window", 4096), ("sliding_window_pattern", 6),
)
JAMBA_DEFAULTS = (("attn_layer_period", 8), ("attn_layer_offset", 4), ("expert_layer_period", 2), ("expert_layer_offset", 1),
                  ("mamba_d_state", 16), ("mamba_d_conv", 4), ("mamba_expand", 2))
QWEN3_NEXT_DEFAULTS = (("full_attention_interval", 4), ("linear_conv_kernel_dim", 4))
DEEPSEEK = dict(mla=True, moe_layer=after_first_dense)
QWEN_MOE = dict(moe_layer=every_sparse_step)

FAMILIES = {
    "llama": Family("Llama"),
    "mistral": Family("Mistral"),
    "mixtral": Family("Mixtral", expert_size_key="intermediate_size"),
    "qwen2": Family("Qwen2", layer_kinds=qwen_windows, qkv_bias=True),
    "qwen2_moe": Family("Qwen2-MoE", layer_kinds=qwen_windows, qkv_bias=True, shared_gate=True, **QWEN_MOE),
    "qwen3": Family("Qwen3", layer_kinds=qwen_windows, qk_norm=True),
    "qwen3_moe": Family("Qwen3-MoE", layer_kinds=qwen_windows, qk_norm=True, **QWEN_MOE),
    "qwen3_next": Family("Qwen3-Next", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                         gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",),
                         shared_gate=True, **QWEN_MOE),
    "qwen3_5_text": Family("Qwen3.5", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                           gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",)),
    "qwen3_5_moe_text": Family("Qwen3.5-MoE", defaults=QWEN3_NEXT_DEFAULTS, layer_kinds=qwen3_next_layers, qk_norm=True,
                               gated_query=True, state_space=gated_deltanet_state, ssm_dtype_keys=("mamba_ssm_dtype",),
                               shared_gate=True, **QWEN_MOE),
    "glm4_moe": Family("GLM-4.5", o_bias=False, moe_layer=after_first_dense, router_bias=True),
    "deepseek_v2": Family("DeepSeek-V2", **DEEPSEEK),
    "deepseek_v3": Family("DeepSeek-V3", **DEEPSEEK),
    "deepseek_v32": Family("DeepSeek-V3.2", **DEEPSEEK),
    "kimi_k2": Family("Kimi K2", **DEEPSEEK),
    "gpt_oss": Family("gpt-oss", attention_bias=True, sinks=True, expert_size_key="intermediate_size", router_bias=True,
                      expert_bias=True),
    "gemma": Family("Gemma", tied=True),
    "gemma2": Family("Gemma 2", tied=True, layer_kinds=gemma2_layers, norms=4),
    "gemma3_text": Family("Gemma 3", tied=True, defaults=GEMMA3_TEXT_DEFAULTS, layer_kinds=gemma3_layers, norms=4, qk_norm=True),
    "mamba": Family("Mamba", tied=True, layer_kinds=all_state_space, norms=1, mlp_layers="none"),
    "mamba2": Family("Mamba-2", defaults=(("n_groups", 1), ("conv_kernel", 4), ("expand", 2)), layer_kinds=all_state_space,
                     norms=1, state_space=mamba2_state, mlp_layers="none"),
    "jamba": Family("Jamba", defaults=JAMBA_DEFAULTS, layer_kinds=jamba_layers, state_space=jamba_state,
                    moe_layer=jamba_experts, expert_size_key="intermediate_size"),
    "nemotron_h": Family("Nemotron-H", defaults=(("n_groups", 8), ("conv_kernel", 4)), layer_kinds=nemotron_layers, norms=1,
                         state_space=mamba2_state, mlp_layers="own", gated_mlp=False, moe_layer=nemotron_experts,
                         ssm_dtype_keys=("mamba_ssm_cache_dtype", "mamba_ssm_dtype"),
                         ssm_dtype_default=("fp32", "vLLM keeps Nemotron-H's SSM state in float32 when the config does not say "
                                                    "(NemotronHForCausalLMConfig)")),
    "phi3": Family("Phi-3"),
    "falcon": Family("Falcon", tied=True, kv_heads=falcon_kv_heads, norms=falcon_norms, norm_bias=True, dense_mlp=falcon_mlp),
}

ARCHITECTURES = {  # configs without model_type still name their class
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen3NextForCausalLM": "qwen3_next", "Glm4MoeForCausalLM": "glm4_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
    "GptOssForCausalLM": "gpt_oss", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3_text", "MambaForCausalLM": "mamba", "Mamba2ForCausalLM": "mamba2",
    "JambaForCausalLM": "jamba", "NemotronHForCausalLM": "nemotron_h", "Phi3ForCausalLM": "phi3",
    "FalconForCausalLM": "falcon", "RWForCausalLM": "falcon",
    "Qwen3_5ForConditionalGeneration": "qwen3_5_text", "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
}
# a model_type whose language model is another family's (a multimodal one's, under text_config)
TEXT_MODEL_TYPES = {"gemma3": "gemma3_text", "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}


def _weights_dtype(root: Config, config: Config, out: ImportedModel) -> None:
    """`weight_dtype` (and MXFP4 experts) from torch_dtype and quantization_config."""
    holder = next((c for c in (root, config) if c.has("torch_dtype") or c.has("dtype")), None)
    dtype = None
    if holder is not None:
        key = "torch_dtype" if holder.has("torch_dtype") else "dtype"
        name = holder.string(key)
        dtype = DTYPES.get(name)
        if dtype is None:
            root.findings.assume(f"`{holder.name(key)}` `{name}` is not a dtype kvdsl knows: weights stay bf16", holder.span(key))
    else:
        root.findings.assume("`torch_dtype` is not set: weights assumed bf16", root.span())
    out.weight_dtype, out.weight_comment = dtype or "bf16", "torch_dtype" if dtype else "assumed"
    quant = root.data.get("quantization_config")
    if quant is None:
        return
    if not isinstance(quant, dict):
        root.findings.error("`quantization_config` must be an object", root.span("quantization_config"))
        raise _Invalid
    method = quant.get("quant_method")
    if method == "mxfp4":
        out.expert_dtype = "mxfp4"
        out.weight_comment = "torch_dtype; quantization_config: MXFP4 experts only"
        return
    read = _compressed_tensors(quant) if method == "compressed-tensors" else _quantized(method, quant)
    if read is None:
        root.findings.assume(f"`quantization_config` ({_shown(method)}) is not one kvdsl reads: weights taken as "
                             f"{out.weight_dtype}", root.span("quantization_config"))
    else:
        out.weight_dtype, out.weight_comment = read


def _quantized(method, quant: dict) -> Optional[tuple[str, str]]:
    """(weight_dtype, comment) of an fp8, GPTQ or AWQ `quantization_config`, or None."""
    block, bits, group = quant.get("weight_block_size"), quant.get("bits"), quant.get("group_size")
    if method == "fp8" and block == [128, 128]:
        return "fp8_block128", "quantization_config: fp8, weight_block_size [128, 128]"
    if method == "fp8" and block is None:
        return "fp8", "quantization_config: fp8, one scale per tensor"
    if method in ("gptq", "awq") and bits == 4 and group == 128:
        return "int4_g128", f"quantization_config: {method}, 4 bits, group 128"
    return None


COMPRESSED_TENSORS = (  # weights' (num_bits, type, strategy, group_size or block_structure) -> format, comment
    ((8, "float", "tensor", None), "fp8", "FP8 weights, one scale per tensor"),
    ((8, "float", "channel", None), "fp8", "FP8 weights, one scale per output channel (not counted)"),
    ((8, "float", "block", [128, 128]), "fp8_block128", "FP8 weights, one scale per 128 x 128 block"),
    ((4, "int", "group", 128), "int4_g128", "INT4 weights, one scale per group of 128"),
    ((4, "float", "tensor_group", 16), "nvfp4", "NVFP4 weights, one FP8 scale per 16"),
)


def _compressed_tensors(quant: dict) -> Optional[tuple[str, str]]:
    """(weight_dtype, comment) of an llm-compressor config whose `config_groups` share one weight scheme, or None."""
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    schemes = []
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            return None
        shape = weights.get("block_structure") if weights.get("strategy") == "block" else weights.get("group_size")
        schemes.append((weights.get("num_bits"), weights.get("type"), weights.get("strategy"), shape))
    if any(scheme != schemes[0] for scheme in schemes):
        return None
    for scheme, dtype, comment in COMPRESSED_TENSORS:
        if scheme == schemes[0]:
            return dtype, f"quantization_config: compressed-tensors, {comment}"
    return None
