"""Parameter counts from a model's shape: what the weights of a checkpoint hold.

`kvdsl import` fills a `Shape` from a config.json and asks `count_params` for
the total, which becomes the model's `params` cell.  The count follows the
module layout of the Hugging Face implementations: embeddings, each layer's
token mixer (attention, MLA, or a state-space / linear-attention mixer), its
MLP (dense or mixture of experts), its norms, the final norm and an untied
output head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Attention:
    """Grouped-query attention projections, or MLA when `kv_lora_rank` is set."""

    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: Optional[int] = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False         # one RMSNorm of head_dim on queries and one on keys
    sinks: bool = False           # gpt-oss: one learned logit per head
    gated_query: bool = False     # Qwen3-Next: q_proj also yields an output gate
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    index_n_heads: int = 0        # DeepSeek-V3.2's sparse-attention indexer
    index_head_dim: int = 0

    def count(self, hidden: int) -> int:
        if self.kv_lora_rank:
            return self._mla(hidden)
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        v = self.kv_heads * (self.v_head_dim or self.head_dim)
        total = hidden * q * (2 if self.gated_query else 1) + hidden * (kv + v) + (self.heads * (self.v_head_dim or self.head_dim)) * hidden
        if self.qkv_bias:
            total += q * (2 if self.gated_query else 1) + kv + v
        if self.o_bias:
            total += hidden
        if self.qk_norm:
            total += 2 * self.head_dim
        if self.sinks:
            total += self.heads
        return total

    def _mla(self, hidden: int) -> int:
        qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
        v_head = self.v_head_dim or self.qk_nope_head_dim
        if self.q_lora_rank:
            q = hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk_head
        else:
            q = hidden * self.heads * qk_head
        kv_a = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
        kv_b = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + v_head)
        return q + kv_a + kv_b + self.heads * v_head * hidden + self._indexer(hidden)

    def _indexer(self, hidden: int) -> int:
        """The lightning indexer: wq_b from the query latent, wk, a LayerNorm on keys, weights_proj."""
        if not self.index_head_dim:
            return 0
        heads, dim = self.index_n_heads, self.index_head_dim
        return self.q_lora_rank * heads * dim + hidden * dim + 2 * dim + hidden * heads


@dataclass
class StateSpace:
    """A Mamba-1, Mamba-2 or gated-delta-net (linear attention) mixer."""

    kind: str                     # "mamba", "mamba2" or "gated_deltanet"
    inner: int                    # Mamba: expand x hidden; delta net: value heads x value head dim
    state_size: int               # Mamba: d_state; delta net: key head dim
    conv_kernel: int
    dt_rank: int = 0              # Mamba-1
    heads: int = 0                # Mamba-2 heads, or delta-net value heads
    groups: int = 1               # Mamba-2 groups
    key_heads: int = 0            # delta net
    conv_bias: bool = True
    proj_bias: bool = False
    inner_norms: bool = False     # Jamba: RMSNorms on dt, B and C

    def count(self, hidden: int) -> int:
        if self.kind == "mamba":
            return self._mamba(hidden)
        if self.kind == "mamba2":
            return self._mamba2(hidden)
        return self._gated_deltanet(hidden)

    def _mamba(self, hidden: int) -> int:
        inner, n, r = self.inner, self.state_size, self.dt_rank
        total = hidden * 2 * inner + (2 * inner if self.proj_bias else 0)          # in_proj
        total += inner * self.conv_kernel + (inner if self.conv_bias else 0)     # conv1d
        total += inner * (r + 2 * n)                                             # x_proj
        total += r * inner + inner                                               # dt_proj
        total += inner * n + inner                                               # A_log, D
        total += inner * hidden + (hidden if self.proj_bias else 0)              # out_proj
        if self.inner_norms:
            total += r + 2 * n
        return total

    def _mamba2(self, hidden: int) -> int:
        inner, n, g, h = self.inner, self.state_size, self.groups, self.heads
        conv = inner + 2 * g * n
        total = hidden * (2 * inner + 2 * g * n + h) + (2 * inner + 2 * g * n + h if self.proj_bias else 0)
        total += conv * self.conv_kernel + (conv if self.conv_bias else 0)
        total += 3 * h                                                           # dt_bias, A_log, D
        total += inner                                                           # gated RMSNorm
        total += inner * hidden + (hidden if self.proj_bias else 0)
        return total

    def _gated_deltanet(self, hidden: int) -> int:
        key = self.key_heads * self.state_size
        value = self.inner
        v_head_dim = value // self.heads
        conv = 2 * key + value
        total = hidden * (2 * key + 2 * value)                                   # in_proj_qkvz
        total += hidden * 2 * self.heads                                         # in_proj_ba
        total += conv * self.conv_kernel
        total += 2 * self.heads                                                  # dt_bias, A_log
        total += v_head_dim                                                      # gated RMSNorm
        total += value * hidden
        return total


@dataclass
class Mlp:
    """A dense MLP, or a mixture of experts with optional shared experts."""

    intermediate: int
    gated: bool = True            # gate, up and down projections (SwiGLU); else up and down
    bias: bool = False
    experts: int = 0
    shared_intermediate: int = 0  # all shared experts together
    shared_gate: bool = False     # Qwen2-MoE / Qwen3-Next: a sigmoid gate on the shared expert
    router_bias: bool = False     # gpt-oss router bias, or DeepSeek-V3's e_score_correction_bias
    expert_bias: bool = False     # gpt-oss: biases on every expert projection
    active_experts: int = 0       # routed experts each token uses (num_experts_per_tok)

    def idle_weights(self, hidden: int) -> int:
        """The routed experts' parameters one token leaves unused."""
        if not self.experts:
            return 0
        matrices = 3 if self.gated else 2
        one = matrices * hidden * self.intermediate + ((matrices - 1) * self.intermediate + hidden if self.expert_bias else 0)
        return (self.experts - self.active_experts) * one

    def expert_weights(self, hidden: int) -> int:
        """The routed experts' weight matrices (what MXFP4 checkpoints quantize)."""
        return self.experts * (3 if self.gated else 2) * hidden * self.intermediate

    def count(self, hidden: int) -> int:
        matrices = 3 if self.gated else 2
        if not self.experts:
            return matrices * hidden * self.intermediate + ((matrices - 1) * self.intermediate + hidden if self.bias else 0)
        total = self.expert_weights(hidden) + hidden * self.experts
        if self.expert_bias:
            total += self.experts * ((matrices - 1) * self.intermediate + hidden)
        if self.router_bias:
            total += self.experts
        if self.shared_intermediate:
            total += 3 * hidden * self.shared_intermediate
        if self.shared_gate:
            total += hidden
        return total


@dataclass
class Layer:
    """One decoder layer: a mixer (or none), an MLP (or none) and its norms."""

    mixer: object                 # Attention, StateSpace or None
    mlp: Optional[Mlp]
    norms: int                    # hidden-size norms in the layer

    def count(self, hidden: int, norm_bias: bool) -> int:
        total = self.norms * hidden * (2 if norm_bias else 1)
        if self.mixer is not None:
            total += self.mixer.count(hidden)
        if self.mlp is not None:
            total += self.mlp.count(hidden)
        return total


@dataclass
class Shape:
    """Everything a parameter count needs, already read from a config."""

    vocab: int
    hidden: int
    tied_embeddings: bool
    layers: list[Layer] = field(default_factory=list)
    norm_bias: bool = False       # LayerNorm (weight and bias) rather than RMSNorm
    final_norm: bool = True


@dataclass
class ParamCount:
    """A total and the terms it is made of, for the spec's comment."""

    total: int
    embeddings: int
    layers: int
    head: int
    norm: int
    expert_weights: int
    active: int = 0               # parameters one token uses: MoE layers count only its experts


def count_params(shape: Shape) -> ParamCount:
    """Every parameter of the checkpoint's language model."""
    embeddings = shape.vocab * shape.hidden
    head = 0 if shape.tied_embeddings else embeddings
    norm = shape.hidden * (2 if shape.norm_bias else 1) if shape.final_norm else 0
    layers = sum(layer.count(shape.hidden, shape.norm_bias) for layer in shape.layers)
    experts = sum(layer.mlp.expert_weights(shape.hidden) for layer in shape.layers if layer.mlp is not None and layer.mlp.experts)
    idle = sum(layer.mlp.idle_weights(shape.hidden) for layer in shape.layers if layer.mlp is not None)
    total = embeddings + layers + head + norm
    return ParamCount(total, embeddings, layers, head, norm, experts, total - idle)


def modules(shape: Shape) -> list:
    """The checkpoint's layer modules as (name, parameters, parts), named as the Hugging Face implementations
    name them (`model.layers.3.self_attn.q_proj`), for the patterns a quantizer leaves unquantized."""
    found = []
    norm = shape.hidden * (2 if shape.norm_bias else 1)
    for i, layer in enumerate(shape.layers):
        prefix = f"model.layers.{i}."
        found += [(prefix + name, norm, []) for name in NORM_NAMES.get(layer.norms, ())]
        mixer = layer.mixer
        if isinstance(mixer, Attention):
            parts = []
            if not mixer.kv_lora_rank:
                v_head = mixer.v_head_dim or mixer.head_dim
                q = shape.hidden * mixer.heads * mixer.head_dim * (2 if mixer.gated_query else 1)
                parts = [(prefix + "self_attn.q_proj", q, []),
                         (prefix + "self_attn.k_proj", shape.hidden * mixer.kv_heads * mixer.head_dim, []),
                         (prefix + "self_attn.v_proj", shape.hidden * mixer.kv_heads * v_head, []),
                         (prefix + "self_attn.o_proj", mixer.heads * v_head * shape.hidden, [])]
            found.append((prefix + "self_attn", mixer.count(shape.hidden), parts))
        elif isinstance(mixer, StateSpace):
            found.append((prefix + ("linear_attn" if mixer.kind == "gated_deltanet" else "mixer"), mixer.count(shape.hidden), []))
        mlp = layer.mlp
        if mlp is not None:
            parts = []
            if mlp.experts:
                parts = [(prefix + "mlp.gate", shape.hidden * mlp.experts + (mlp.experts if mlp.router_bias else 0), []),
                         (prefix + "mlp.experts", mlp.expert_weights(shape.hidden), [])]
                if mlp.shared_intermediate:
                    parts.append((prefix + "mlp.shared_experts", 3 * shape.hidden * mlp.shared_intermediate, []))
            found.append((prefix + "mlp", mlp.count(shape.hidden), parts))
    if shape.final_norm:
        found.append(("model.norm", norm, []))
    return found


# the Hugging Face names of a layer's hidden-size norms, by how many it has (a quantizer's list may name them)
NORM_NAMES = {1: ("norm",), 2: ("input_layernorm", "post_attention_layernorm"),
              4: ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")}
