"""The MHA / GQA / MQA what-if is a model with that many KV heads: more heads need more K and V
projection weights, which cost memory, FLOPs and context; fewer save them."""

from __future__ import annotations

from dataclasses import replace

from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import fit

GIB = 1 << 30


def test_llama_3_8b_as_mha_holds_its_extra_kv_projections():
    model = memory_model.preset("llama-3-8b")
    mha = memory_model.kind_variants(model)["MHA"]
    extra = 32 * 2 * 4096 * 128 * (32 - 8)  # layers × (K, V) × d_model × head_dim × the 24 KV heads added
    assert extra == 805_306_368  # "~0.8 B"
    assert mha.n_params == model.n_params + extra and mha.active_params is model.active_params is None  # dense
    assert memory.weight_bytes(mha, "bf16") - memory.weight_bytes(model, "bf16") == 2 * extra  # ~1.5 GiB
    assert memory.token_flops(mha, 0) - memory.token_flops(model, 0) == 2 * extra
    assert memory_model.kind_variants(model)["GQA"].n_params == model.n_params  # its own kind is itself
    mqa = memory_model.kind_variants(model)["MQA"]
    assert mqa.n_params == model.n_params - 32 * 2 * 4096 * 128 * (8 - 1)


def test_llama_3_70b_as_mha_weighs_17_gib_more_and_fits_a_shorter_context():
    model = memory_model.preset("llama-3-70b")  # Llama 3.1 70B has the same shape
    mha = memory_model.kind_variants(model)["MHA"]
    extra_bytes = 2 * (80 * 2 * 8192 * 128 * (64 - 8))  # bf16
    assert memory.weight_bytes(mha, "bf16") - memory.weight_bytes(model, "bf16") == extra_bytes
    assert 17.4 < extra_bytes / GIB < 17.6
    lengths = memory.context_lengths(8192)
    with_weights = fit(mha, lengths, 200.0)
    cache_only = fit(replace(model, kv_heads=64), lengths, 200.0)  # the what-if as it was: cache alone
    assert with_weights.bill.weights == memory.weight_bytes(mha, "bf16")
    assert with_weights.longest < cache_only.longest
    per_token = 80 * 2 * 64 * 128 * 2  # bf16 KV bytes a token adds as MHA
    assert (cache_only.longest - with_weights.longest) * per_token >= 0.9 * extra_bytes  # ~what the weights took
