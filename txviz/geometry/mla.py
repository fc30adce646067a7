"""DeepSeek-V2/V3: multi-head latent attention (MLA) and DeepSeekMoE (DeepSeek-AI 2024, the
sections on the architecture).

Per token and layer the cache holds the compressed latent c_KV (``kv_lora_rank`` wide) and one
decoupled RoPE key shared by all heads (``qk_rope_head_dim``), not 2·heads·head_dim: K and V are
re-expanded from the latent by ``kv_b_proj``. Parameters, after transformers' DeepseekV3 modules:
queries through a low-rank pair (``q_lora_rank``; V2-Lite has none and one q_proj), the latent
projection and its RMSNorm, the expansion, the output; MoE from layer ``first_k_dense_replace`` on
(every ``moe_layer_freq``-th), each with a router, ``n_routed_experts`` experts of which
``num_experts_per_tok`` run, and ``n_shared_experts`` every token runs. The multi-token-prediction
module of V3 (``num_nextn_predict_layers``) is not part of the model that serves tokens, and V3's
router score bias is a buffer in transformers (256 fp32 numbers per layer): neither is counted.
"""

from __future__ import annotations

from txviz.geometry import params
from txviz.geometry.fields import Fields, architectures
from txviz.geometry.geometry import Geometry


def _attention(f: Fields, d: int, heads: int) -> tuple[int, int, dict]:
    """(the projections' parameters, the latent RMSNorms', the widths)."""
    nope, rope, v = f.count("qk_nope_head_dim"), f.count("qk_rope_head_dim"), f.count("v_head_dim")
    latent, q_rank = f.count("kv_lora_rank"), f.optional("q_lora_rank")
    bias = f.flag("attention_bias", False)
    qk = nope + rope
    queries = (params.linear(d, heads * qk) if q_rank is None else
               params.linear(d, q_rank, bias) + params.linear(q_rank, heads * qk))
    keys_values = params.linear(d, latent + rope, bias) + params.linear(latent, heads * (nope + v))
    total = queries + keys_values + params.linear(heads * v, d, bias)
    return total, latent + (q_rank or 0), dict(latent_dim=latent, rope_dim=rope, qk_head_dim=qk, v_head_dim=v)


def _moe_layers(f: Fields, n_layers: int) -> tuple[bool, ...]:
    if not f.count("n_routed_experts", default=0, minimum=0):
        return tuple(False for _ in range(n_layers))
    first, every = f.count("first_k_dense_replace", default=0, minimum=0), f.count("moe_layer_freq", default=1)
    return tuple(i >= first and i % every == 0 for i in range(n_layers))


def read_mla(f: Fields, model_type: str) -> Geometry:
    n, d = f.count("num_hidden_layers"), f.count("hidden_size")
    for derived in ("num_key_value_heads", "head_dim", "qk_head_dim"):  # understood: MLA caches a latent, its
        f.raw.get(derived)  # KV heads are the query heads, its head sizes follow from the dims read below
    heads, vocab, dense = f.count("num_attention_heads"), f.count("vocab_size"), f.count("intermediate_size")
    attention, norms, dims = _attention(f, d, heads)
    moe = _moe_layers(f, n)
    experts = f.count("n_routed_experts", default=0, minimum=0)
    used = f.count("num_experts_per_tok") if experts else 0
    width = f.count("moe_intermediate_size") if experts else 0
    shared = f.count("n_shared_experts", default=0, minimum=0)
    f.check()
    tied = f.flag("tie_word_embeddings", False)
    tally = params.Tally()
    tally.add(vocab * d, "embeddings", multiplied=tied)
    widths = []
    for is_moe in moe:
        tally.add(2 * d + norms, "small", multiplied=False)
        tally.add(attention, "attention")
        if is_moe:
            tally.add(experts * d, "router")
            tally.add(params.mlp(d, shared * width, gated=True, bias=False), "mlp")  # the shared experts
            tally.experts(experts, params.mlp(d, width, gated=True, bias=False), used)
            widths.append((used + shared) * width)
        else:
            tally.add(params.mlp(d, dense, gated=True, bias=False), "mlp")
            widths.append(dense)
    tally.add(d, "small", multiplied=False)
    tally.add(0 if tied else vocab * d, "embeddings")
    return Geometry(
        model_type=model_type, architecture=(architectures(f.raw) or [model_type])[0], n_layers=n,
        d_model=d, vocab_size=vocab, n_heads=heads, kv_heads=(heads,) * n, head_dims=(dims["v_head_dim"],) * n,
        windows=(None,) * n, n_params=tally.total, active_params=tally.active,
        unmultiplied_params=tally.unmultiplied, ffn_width=max(widths), tied_embeddings=tied,
        max_context=f.optional("max_position_embeddings"),
        latent_dim=dims["latent_dim"], rope_dim=dims["rope_dim"], qk_head_dim=dims["qk_head_dim"],
        n_experts=experts, experts_per_token=used, shared_experts=shared, moe_layers=sum(moe),
        param_groups=tuple(tally.groups.items()),
        notes=("multi-token-prediction layers not counted",) if f.raw.get("num_nextn_predict_layers") else ())
