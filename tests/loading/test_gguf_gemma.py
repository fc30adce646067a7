"""The GGUF loader on tiny Gemma-family files written as llama.cpp writes them (tests/helpers/tiny_gguf_gemma.py):
the config each arch implies (layer kinds, window, local RoPE base, norms, soft-caps), exact round trips
without any Q/K un-permutation, and clear refusals."""

from __future__ import annotations

import math

import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType

from tests.helpers.tiny import random_decoder, random_ids
from tests.helpers.tiny_gguf import quantize_roundtrip
from tests.helpers.tiny_gguf_gemma import spm_vocab, write_gemma_gguf
from txviz import Decoder, ModelConfig
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.loader import load_gguf, read_gguf_config

BASE = dict(vocab_size=len(spm_vocab()[0]), d_model=64, n_heads=4, n_kv_heads=1, head_dim=32, ffn_hidden=96,
            max_seq_len=64, norm_eps=2.0 ** -20, ffn="geglu", gelu_approximate="tanh", embed_scale=8.0,
            tie_embeddings=True, name="tiny-gemma")
# what each architecture's file must come back as (llama.cpp's fixed defaults spelled out by hand)
EXPECTED = {
    "gemma": ModelConfig(**BASE, n_layers=2, rope_theta=10000.0),
    "gemma2": ModelConfig(**BASE, n_layers=4, rope_theta=10000.0, sliding_window=8, sandwich_norm=True,
                          layer_types=("sliding", "full", "sliding", "full"), attn_softcap=50.0, final_softcap=30.0),
    "gemma3": ModelConfig(**BASE, n_layers=6, rope_theta=1e6, sliding_window=8, rope_local_theta=10000.0,
                          layer_types=("sliding",) * 5 + ("full",), qk_norm=True, sandwich_norm=True),
}


def weights_of(config: ModelConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in random_decoder(config, seed).state_dict().items()}


def logits(model: Decoder, config: ModelConfig, n_tokens: int = 20) -> torch.Tensor:
    with torch.inference_mode():
        return model(random_ids(config, n_tokens, seed=1))


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_config_from_metadata(arch, tmp_path):
    config = EXPECTED[arch]
    path = write_gemma_gguf(tmp_path / "m.gguf", arch, config, weights_of(config))
    assert read_gguf_config(path) == config.replace(source=str(path))


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_f32_round_trip_is_exact_and_not_permuted(arch, tmp_path):
    """Every weight comes back as written (Q/K rows included: llama.cpp does not permute Gemma) and the
    logits equal those of the same weights built directly; 20 tokens > the window of 8."""
    config = EXPECTED[arch]
    weights = weights_of(config)
    loaded = load_gguf(write_gemma_gguf(tmp_path / "m.gguf", arch, config, weights), device="cpu")
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert torch.equal(logits(loaded.model, config), logits(Decoder.from_state_dict(config, weights), config))
    assert loaded.tokenizer is not None and loaded.tokenizer.adds_bos


def test_quantized_round_trip_matches_gguf_codec(tmp_path):
    config = EXPECTED["gemma3"]
    weights = weights_of(config)
    loaded = load_gguf(write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights, qtype=Q.Q8_0), device="cpu")
    expected = {k: torch.from_numpy(quantize_roundtrip(v.numpy(), Q.Q8_0 if v.dim() > 1 else Q.F32))
                for k, v in weights.items()}
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, expected[name]), name


@pytest.mark.parametrize("pattern,kinds", [
    ((3, GGUFValueType.UINT32), ("sliding", "sliding", "full", "sliding", "sliding", "full")),
    ([True, False, True, True, False, True], ("sliding", "full", "sliding", "sliding", "full", "sliding")),
])
def test_sliding_window_pattern_key_overrides_the_default(pattern, kinds, tmp_path):
    config = EXPECTED["gemma3"]
    value = pattern if isinstance(pattern, tuple) else (pattern, GGUFValueType.ARRAY)
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights_of(config),
                            metadata={"{arch}.attention.sliding_window_pattern": value})
    assert read_gguf_config(path).layer_types == kinds


def test_no_window_key_means_every_layer_is_global(tmp_path):
    config = EXPECTED["gemma3"].replace(sliding_window=None, layer_types=None, rope_local_theta=None)
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights_of(config))
    read = read_gguf_config(path)
    assert read.layer_windows == (None,) * 6 and read.rope_local_theta is None


def test_rope_scaling_on_gemma_is_refused(tmp_path):
    """llama.cpp scales only the global layers' RoPE on Gemma 3; one config-wide scaling would be wrong."""
    config = EXPECTED["gemma3"]
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights_of(config), metadata={
        "{arch}.rope.scaling.type": ("linear", GGUFValueType.STRING),
        "{arch}.rope.scaling.factor": (8.0, GGUFValueType.FLOAT32)})
    with pytest.raises(ModelLoadError, match="global layers"):
        read_gguf_config(path)


def test_a_tensor_of_the_wrong_shape_is_named_before_dequantizing(tmp_path):
    config = EXPECTED["gemma3"]
    weights = weights_of(config)
    weights["layers.2.attn.k_norm.weight"] = torch.ones(16)  # head_dim is 32
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights)
    with pytest.raises(ModelLoadError, match=r"blk\.2\.attn_k_norm\.weight has shape \(16,\)"):
        load_gguf(path, device="cpu")


def test_a_missing_post_norm_is_refused(tmp_path):
    config = EXPECTED["gemma3"]
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights_of(config),
                            drop=("blk.3.post_ffw_norm.weight",))
    with pytest.raises(ModelLoadError, match="post_ffn_norm"):
        load_gguf(path, device="cpu")


def test_embed_scale_is_sqrt_d_model(tmp_path):
    config = EXPECTED["gemma"].replace(d_model=96, embed_scale=math.sqrt(96), head_dim=32)
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma", config, weights_of(config))
    assert read_gguf_config(path).embed_scale == math.sqrt(96)
