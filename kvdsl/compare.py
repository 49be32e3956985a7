"""`kvdsl compare`: one deployment under every engine's accounting, and why they differ.

The figures are cells of the prelude (`<engine>_kv_bytes_per_token_per_gpu`,
`_kv_cache_tokens`, `_num_blocks`, `_max_concurrency`, `_max_context`); this
module only lays them side by side and names, for each engine, the rules whose
values make it differ from the ideal accounting.
"""

from __future__ import annotations

from fractions import Fraction

from .display import bytes_text, gib_text, json_number, plain_number
from .graph import Program

FIGURES = ("kv_bytes_per_token_per_gpu", "kv_cache_tokens", "num_blocks", "max_concurrency", "max_context")
HEADERS = ("engine", "KV/token/GPU", "KV tokens", "blocks", "concurrency", "max context")
GROUP_KINDS = {"full": "full-attention", "sliding": "sliding-window", "state": "state"}


def engines(program: Program, values: dict) -> list:
    """The engine blocks of the prelude, in their `code` order."""
    blocks = [b for b in program.blocks.values() if b.kind == "engine"]
    return sorted(blocks, key=lambda b: values[(b.name, "code")])


def compare(program: Program, values: dict, block: str) -> dict:
    """Every engine's figures for `block`, and the reasons each differs from ideal."""
    v = lambda cell: values[(block, cell)]  # noqa: E731
    rows = {}
    for engine in engines(program, values):
        rows[engine.name] = {figure: values[(block, f"{engine.name}_{figure}")] for figure in FIGURES}
    why = _Reasons(values, block)
    return {
        "block": block,
        "title": program.blocks[block].title,
        "engine": v("engine"),
        "context": v("context"),
        "batch": v("batch"),
        "engines": rows,
        "reasons": {name: why.of(name) for name in rows if name != "ideal"},
    }


def compare_json(result: dict) -> dict:
    out = dict(result)
    out["engines"] = {name: {k: json_number(x) for k, x in row.items()} for name, row in result["engines"].items()}
    out["context"], out["batch"] = json_number(result["context"]), json_number(result["batch"])
    return out


def compare_text(result: dict, titles: dict) -> str:
    context, batch = plain_number(result["context"]), plain_number(result["batch"])
    lines = [f"{result['block']}: {result['title']}",
             f"context {context} tokens, batch {batch}; engine = {result['engine']} (marked *)", ""]
    table = [HEADERS]
    for name, row in result["engines"].items():
        table.append((
            name + (" *" if name == result["engine"] else ""),
            bytes_text(row["kv_bytes_per_token_per_gpu"]),
            plain_number(row["kv_cache_tokens"]),
            plain_number(row["num_blocks"]),
            f"{float(row['max_concurrency']):.2f}x",
            plain_number(row["max_context"]),
        ))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(HEADERS))]
    for r in table:
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    lines.append("")
    lines.append(f"KV tokens: the token figure each engine logs (ideal: tokens the KV budget holds); "
                 f"concurrency: requests of {context} tokens at once; max context: the longest context {batch} request(s) can each hold")
    for name, reasons in result["reasons"].items():
        lines.append("")
        lines.append(f"{name} ({titles[name]}) differs from ideal because:")
        lines += [f"  - {reason}" for reason in reasons] or ["  - nothing: the same figures"]
    return "\n".join(lines)


class _Reasons:
    """The rules that make one engine's figures differ from the ideal ones, with their values."""

    def __init__(self, values: dict, block: str):
        self.values, self.block = values, block

    def v(self, cell):
        return self.values[(self.block, cell)]

    def m(self, cell):
        return self.values[(self.v("model"), cell)]

    def of(self, engine: str) -> list:
        return getattr(self, f"_{engine}", lambda: [])()

    # -- shared -------------------------------------------------------------------

    def _ideal_budget(self) -> str:
        return (f"ideal: utilization {float(self.v('utilization')):g} x {gib_text(self.v('memory_per_gpu'))} "
                f"- weights {gib_text(self.v('weights_bytes_per_gpu'))} - reserve {gib_text(self.v('reserve_bytes'))} "
                f"= {gib_text(self.v('kv_budget_bytes_per_gpu'))}")

    def _heads(self, engine: str, rule: str) -> list:
        if self.m("mla") or self.v(f"{engine}_kv_heads_per_gpu") == self.v("kv_heads_per_gpu"):
            return []
        return [f"KV heads per GPU: {rule} = {plain_number(self.v(f'{engine}_kv_heads_per_gpu'))}, "
                f"not ceil(max(kv_heads / tensor_parallel, 1)) = {plain_number(self.v('kv_heads_per_gpu'))}"]

    def _scales(self, engine: str, label: str) -> list:
        stored = self.v(f"{engine}_dtype_bytes")
        if stored == self.v("kv_bytes_per_element"):
            return []
        return [f"{label} stores `{self.v('kv_dtype')}` in {float(stored):.4g} bytes per element with one scale per tensor, "
                f"not {float(self.v('kv_bytes_per_element')):.4g} with per-token-and-head scales"]

    def _stages(self, engine_layers: str) -> list:
        stages = self.v("pipeline_stages")
        if stages == 1:
            return []
        return [f"pipeline parallel: the largest of {plain_number(stages)} stages holds {plain_number(self.v(engine_layers))} "
                f"layers (ceil(layers / stages)) and sets the pool; ideal spreads the layers evenly"]

    # -- vLLM ---------------------------------------------------------------------

    def _vllm(self) -> list:
        v, reasons = self.v, []
        memory = v("vllm_kv_memory_bytes")
        if v("kv_cache_memory_bytes") > 0:
            reasons.append(f"KV memory is the given kv_cache_memory_bytes, {gib_text(memory)} per GPU ({self._ideal_budget()})")
        elif abs(memory - v("kv_budget_bytes_per_gpu")) >= 1:   # more than the byte ceil() rounds
            reasons.append(f"KV memory: ceil(cuda_memory x utilization) - weights - reserve = {gib_text(memory)} per GPU "
                           f"({self._ideal_budget()})")
        reasons += self._heads("vllm", "max(1, kv_heads // tensor_parallel)")
        reasons += self._scales("vllm", "vLLM")
        reasons += self._stages("vllm_layers")
        if v("speculative_layers") > 0:
            reasons.append(f"{plain_number(v('speculative_layers'))} draft-model layers share the pool")
        if not v("vllm_hybrid_allocator") and self.m("sliding_layers") > 0:
            reasons.append("the hybrid allocator is off: sliding-window layers keep every token like full ones")
        block = v("vllm_block_size")
        if block != v("block_size"):
            state = v("vllm_state_bytes")
            padding = (v("vllm_page_bytes") - state) / state * 100
            reasons.append(f"the attention block grows to {plain_number(block)} tokens so one page ({bytes_text(v('vllm_page_bytes'))}) "
                           f"holds a whole {bytes_text(state)} state; the state page is padded by {float(padding):.2f}%")
        groups, size = v("vllm_groups"), v("vllm_group_size")
        if groups > 1:
            kinds = [f"{plain_number(v(f'vllm_{k}_groups'))} {label}" for k, label in GROUP_KINDS.items() if v(f"vllm_{k}_groups")]
            text = (f"layers form {plain_number(groups)} groups of {plain_number(size)} ({', '.join(kinds)}); "
                    f"one block is a page in {plain_number(size)} layers")
            if v("vllm_padding_layers"):
                text += f", {plain_number(v('vllm_padding_layers'))} of them padding"
            reasons.append(text)
        if v("vllm_sliding_groups"):
            reasons.append(f"a request keeps ceil(min(window - 1 + max_num_batched_tokens, context) / block) + 1 = "
                           f"{plain_number(v('vllm_sliding_pages'))} pages in each sliding group "
                           f"(window {plain_number(self.m('window'))}, max_num_batched_tokens {plain_number(v('max_num_batched_tokens'))})")
        reasons += self._vllm_tokens()
        if not reasons:
            reasons.append(f"the pool is {plain_number(v('vllm_num_blocks'))} whole blocks and a request takes "
                           f"{plain_number(v('vllm_pages_per_request'))} whole page(s)")
        return reasons

    def _vllm_tokens(self) -> list:
        v = self.v
        blocks, groups, pages = v("vllm_num_blocks"), v("vllm_groups"), v("vllm_pages_per_request")
        context, tokens, concurrency = v("context"), v("vllm_kv_cache_tokens"), v("vllm_max_concurrency")
        parts = [f"{plain_number(v(f'vllm_{k}_groups'))} x {plain_number(v(f'vllm_{k}_pages'))}"
                 for k in ("full", "sliding", "state") if v(f"vllm_{k}_groups")]
        per_request = f"a request of {plain_number(context)} tokens takes {' + '.join(parts)} = {plain_number(pages)} pages"
        if v("vllm_tokens_from_concurrency"):
            rule = f"the token figure is int(concurrency x context) = {plain_number(tokens)}"
            if groups == 1 and context % v("vllm_block_size") == 0:
                return []
            return [f"{rule}; {per_request}, so concurrency is {plain_number(blocks)} / {plain_number(pages)} = {float(concurrency):.2f}x"]
        naive = tokens / context
        if groups == 1 and abs(naive - concurrency) < Fraction(1, 200):
            return []
        return [f"the token figure is blocks // groups x block = {plain_number(blocks)} // {plain_number(groups)} x "
                f"{plain_number(v('vllm_block_size'))} = {plain_number(tokens)}, a reporting convention that counts every group's "
                f"blocks as full-attention tokens; {per_request}, so concurrency is {plain_number(blocks)} / {plain_number(pages)} "
                f"= {float(concurrency):.2f}x, not {plain_number(tokens)} / {plain_number(context)} = {float(naive):.2f}x"]

    def _pool(self, engine: str, label: str, memory: str, heads_rule: str = "") -> list:
        """The reasons an engine that sizes one token pool from memory shares with the others."""
        if self.v(f"{engine}_kv_bytes_per_token_per_gpu") == 0:
            return [f"no attention layers: {label} has no token pool to size here"]
        reasons = [f"{memory} ({self._ideal_budget()})"]
        if heads_rule:
            reasons += self._heads(engine, heads_rule)
        reasons += self._scales(engine, label)
        reasons += self._stages(f"{engine}_layers")
        if self.m("ssm_layers"):
            reasons.append("state-space layers are not modelled here: the tokens count attention layers only")
        return reasons

    # -- SGLang -------------------------------------------------------------------

    def _sglang(self) -> list:
        v = self.v
        reasons = self._pool("sglang", "SGLang",
                             f"mem_fraction_static {float(v('sglang_mem_fraction_static')):g} of the {gib_text(v('sglang_free_memory_bytes'))} "
                             f"free at start holds weights and KV: {gib_text(v('sglang_kv_memory_bytes'))} of KV per GPU",
                             "max(1, kv_heads // tensor_parallel)")
        if v("sglang_kv_bytes_per_token_per_gpu") == 0:
            return reasons
        if self.m("sliding_layers") and self.m("full_layers"):
            reasons.append(f"sliding-window layers get their own pool, swa_full_tokens_ratio {float(v('sglang_swa_full_tokens_ratio')):g} "
                           f"of the full pool; the full pool holds {plain_number(v('sglang_full_tokens'))} tokens")
        if v("sglang_page_size") != v("block_size"):
            reasons.append(f"pages of {plain_number(v('sglang_page_size'))} token(s), not {plain_number(v('block_size'))}")
        return reasons

    # -- TensorRT-LLM ---------------------------------------------------------------

    def _trtllm(self) -> list:
        v = self.v
        kv_memory = v("trtllm_free_gpu_memory_fraction") * v("trtllm_free_memory_bytes")
        reasons = self._pool("trtllm", "TensorRT-LLM",
                             f"free_gpu_memory_fraction {float(v('trtllm_free_gpu_memory_fraction')):g} of the "
                             f"{gib_text(v('trtllm_free_memory_bytes'))} left after weights and reserve: {gib_text(kv_memory)} of KV per GPU")
        if v("trtllm_kv_bytes_per_token_per_gpu") == 0:
            return reasons
        reasons.append(f"blocks of {plain_number(v('trtllm_tokens_per_block'))} tokens, rounded up: "
                       f"ceil({plain_number(v('trtllm_max_tokens'))} / {plain_number(v('trtllm_tokens_per_block'))}) "
                       f"= {plain_number(v('trtllm_num_blocks'))}")
        if self.m("sliding_layers"):
            reasons.append("sliding-window layers are sized like full ones (one attention window for every layer)")
        return reasons

    # -- llama.cpp --------------------------------------------------------------------

    def _llamacpp(self) -> list:
        v, reasons = self.v, []
        reasons.append(f"the cache is what -c asks for, not what memory allows: n_ctx = context x batch = "
                       f"{plain_number(v('llamacpp_n_ctx'))} cells, padded to {plain_number(v('llamacpp_padding'))}: "
                       f"{plain_number(v('llamacpp_cells'))} cells, {gib_text(v('llamacpp_kv_cache_bytes'))} in all "
                       f"(K {gib_text(v('llamacpp_k_bytes'))}, V {gib_text(v('llamacpp_v_bytes'))})")
        if v("gpus") > 1:
            reasons.append(f"layers, not heads, are split across the {plain_number(v('gpus'))} devices")
        if self.m("sliding_layers"):
            reasons.append(f"sliding-window layers keep n_swa x n_seq + n_ubatch = {plain_number(v('llamacpp_swa_cells'))} cells (padded)")
        if self.m("ssm_layers"):
            reasons.append(f"recurrent state is kept in f32: {gib_text(v('llamacpp_state_bytes'))} for {plain_number(v('llamacpp_n_seq'))} sequence(s)")
        per_element = self.values[(self.v("kv_dtype"), "bytes_per_element")]
        if per_element != Fraction(self.values[(self.v("kv_dtype"), "payload_bits")], 8):
            reasons.append(f"`{v('kv_dtype')}` rows carry their block scales: {float(per_element):.4g} bytes per element")
        if v("llamacpp_max_concurrency") != v("ideal_max_concurrency"):
            reasons.append(f"concurrency is cells / context = {float(v('llamacpp_max_concurrency')):.2f}x: the sequences share the cells")
        return reasons
