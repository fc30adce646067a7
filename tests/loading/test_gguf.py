"""The GGUF loader against tiny GGUF files written here the way llama.cpp writes them (tests/tiny_gguf.py):
names, the Q/K un-permutation, every quantization type gguf can write, MoE, and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType

from tests.helpers.tiny import default_inv_freq, random_ids, rotate_pairs_reference
from tests.helpers.tiny_gguf import (CONTROL_TOKENS, llamacpp_permute, quantize_roundtrip, tiny, tiny_vocab, weights_of,
                                     write_gguf)
from txviz import Decoder, ModelConfig
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.loader import load_gguf, read_gguf_config, unpermute_rope_rows


def logits(model: Decoder, config: ModelConfig) -> torch.Tensor:
    with torch.inference_mode():
        return model(random_ids(config, 12, seed=1))


# ---- the permutation ----------------------------------------------------------------------------
@pytest.mark.parametrize("n_heads,n_kv_heads,head_dim", [(4, 4, 8), (4, 2, 16), (6, 1, 4)])
def test_unpermute_inverts_llamacpp_permute(n_heads, n_kv_heads, head_dim):
    q = torch.randn(n_heads * head_dim, 24)
    k = torch.randn(n_kv_heads * head_dim, 24)
    q_file = torch.from_numpy(llamacpp_permute(q.numpy(), n_heads, n_heads))
    k_file = torch.from_numpy(llamacpp_permute(k.numpy(), n_heads, n_kv_heads))
    assert not torch.equal(q_file, q)  # the file really is in another order
    assert torch.equal(unpermute_rope_rows(q_file, n_heads), q)
    assert torch.equal(unpermute_rope_rows(k_file, n_kv_heads), k)
    bias = torch.randn(n_heads * head_dim)
    assert torch.equal(unpermute_rope_rows(torch.from_numpy(llamacpp_permute(bias.numpy(), n_heads)), n_heads), bias)


def rope_adjacent_pairs(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """llama.cpp's "normal" RoPE: rotate (x_2i, x_2i+1) by m·θ_i. x (T, D)."""
    angle = positions.double()[:, None] * inv_freq.double()[None, :]
    even, odd = x.double()[:, 0::2], x.double()[:, 1::2]
    out = torch.empty_like(x, dtype=torch.float64)
    out[:, 0::2] = angle.cos() * even - angle.sin() * odd
    out[:, 1::2] = angle.sin() * even + angle.cos() * odd
    return out


def test_permutation_is_what_makes_adjacent_pair_rope_equal_rotate_half():
    """The reason for the permutation: llama.cpp's adjacent-pair RoPE on permuted rows gives the same
    attention scores as rotate-half RoPE on the original rows, and mixing the layouts does not."""
    torch.manual_seed(0)
    head_dim, positions = 16, torch.arange(7)
    inv_freq = default_inv_freq(head_dim, 10000.0)
    x = torch.randn(7, 32, dtype=torch.float64)
    w_q, w_k = torch.randn(head_dim, 32, dtype=torch.float64), torch.randn(head_dim, 32, dtype=torch.float64)

    def scores(q, k):
        return q @ k.T

    reference = scores(rotate_pairs_reference(x @ w_q.T, positions, inv_freq),
                       rotate_pairs_reference(x @ w_k.T, positions, inv_freq))
    pq, pk = (torch.from_numpy(llamacpp_permute(w.numpy(), 1)) for w in (w_q, w_k))
    llamacpp = scores(rope_adjacent_pairs(x @ pq.T, positions, inv_freq), rope_adjacent_pairs(x @ pk.T, positions, inv_freq))
    mixed = scores(rotate_pairs_reference(x @ pq.T, positions, inv_freq), rotate_pairs_reference(x @ pk.T, positions, inv_freq))
    torch.testing.assert_close(llamacpp, reference)
    assert (mixed - reference).abs().max() > 1e-2


# ---- round trips --------------------------------------------------------------------------------
LOSSY_TYPES = [Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]


def test_f32_round_trip_is_exact(tmp_path):
    config = tiny()
    weights = weights_of(config)
    loaded = load_gguf(write_gguf(tmp_path / "m.gguf", config, weights), device="cpu")
    assert loaded.config == config.replace(source=loaded.source)
    assert loaded.format == "gguf" and loaded.device.type == "cpu"
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    reference = Decoder.from_state_dict(config, weights)
    assert torch.equal(logits(loaded.model, config), logits(reference, config))


@pytest.mark.parametrize("qtype", LOSSY_TYPES, ids=lambda q: q.name)
def test_quantized_round_trip_matches_gguf_codec(tmp_path, qtype):
    config = tiny()
    weights = weights_of(config)
    loaded = load_gguf(write_gguf(tmp_path / "m.gguf", config, weights, qtype=qtype), device="cpu")
    expected = {k: torch.from_numpy(quantize_roundtrip(v.numpy(), qtype if v.dim() > 1 else Q.F32))
                for k, v in weights.items()}
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, expected[name]), name
        scale = weights[name].abs().max()
        assert (value - weights[name]).abs().max() <= 0.25 * scale, f"{name}: not a plausible {qtype.name} copy"
    assert loaded.metadata["tensor_types"][qtype.name] == 2 + 7 * config.n_layers  # embed, output, 7 per layer
    reference = Decoder.from_state_dict(config, expected)
    assert torch.equal(logits(loaded.model, config), logits(reference, config))


def test_mixed_types_as_llama_cpp_ships_them(tmp_path):
    config = tiny(tie_embeddings=True)
    weights = weights_of(config)
    path = write_gguf(tmp_path / "m.gguf", config, weights, qtype=Q.Q4_1, qtypes={"token_embd.weight": Q.Q8_0})
    loaded = load_gguf(path, device="cpu", dtype=torch.bfloat16)
    assert loaded.config.tie_embeddings and loaded.model.lm_head is None
    assert loaded.dtype == torch.bfloat16
    assert loaded.metadata["tensor_types"] == {"Q8_0": 1, "Q4_1": 7 * config.n_layers, "F32": 1 + 2 * config.n_layers}
    assert torch.equal(loaded.model.embed.weight.float(),
                       torch.from_numpy(quantize_roundtrip(weights["embed.weight"].numpy(), Q.Q8_0)).bfloat16().float())


def test_head_dim_from_key_length(tmp_path):
    config = tiny(head_dim=32)  # n_heads·head_dim = 128 ≠ d_model
    weights = weights_of(config)
    path = write_gguf(tmp_path / "m.gguf", config, weights)
    assert read_gguf_config(path).head_dim == 32
    reference = Decoder.from_state_dict(config, weights)
    assert torch.equal(logits(load_gguf(path, device="cpu").model, config), logits(reference, config))


@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0], ids=lambda q: q.name)
def test_moe_round_trip(tmp_path, qtype):
    config = tiny(n_experts=4, top_k=2)
    weights = weights_of(config)
    loaded = load_gguf(write_gguf(tmp_path / "moe.gguf", config, weights, qtype=qtype), device="cpu")
    assert (loaded.config.n_experts, loaded.config.top_k, loaded.config.router_norm) == (4, 2, "topk")
    expected = {k: torch.from_numpy(quantize_roundtrip(v.numpy(), qtype if v.dim() > 1 else Q.F32))
                for k, v in weights.items()}
    reference = Decoder.from_state_dict(config, expected)
    assert torch.equal(logits(loaded.model, config), logits(reference, config))


# ---- metadata -----------------------------------------------------------------------------------
def test_config_read_from_metadata(tmp_path):
    config = tiny()
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config))
    assert read_gguf_config(path) == config.replace(source=str(path))


@pytest.mark.parametrize("kind", ["linear", "yarn"])
def test_rope_scaling_metadata(tmp_path, kind):
    config = tiny()
    scaling = {"{arch}.rope.scaling.type": (kind, GGUFValueType.STRING),
               "{arch}.rope.scaling.factor": (4.0, GGUFValueType.FLOAT32),
               "{arch}.rope.scaling.original_context_length": (16, GGUFValueType.UINT32)}
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), metadata=scaling)
    read = read_gguf_config(path).rope_scaling
    assert (read.kind, read.factor) == (kind, 4.0)
    assert read.original_max_seq_len == (16 if kind == "yarn" else None)


def test_unsupported_rope_scaling_is_refused(tmp_path):
    config = tiny()
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config),
                      metadata={"{arch}.rope.scaling.type": ("longrope", GGUFValueType.STRING)})
    with pytest.raises(ModelLoadError, match="longrope"):
        read_gguf_config(path)


# ---- tokenizer ----------------------------------------------------------------------------------
def test_tokenizer_rebuilt_from_metadata(tmp_path):
    config = tiny()
    tok = load_gguf(write_gguf(tmp_path / "m.gguf", config, weights_of(config)), device="cpu").tokenizer
    vocab = tiny_vocab()
    assert tok.vocab_size == len(vocab)
    assert (tok.bos_id, tok.eos_id, tok.sink_id) == (1, 2, 0)
    assert tok.encode(" the").ids == (vocab.index("Ġthe"),)  # merges applied in order
    assert tok.encode("he 12").tokens == ("he", " ", "1", "2")  # smollm: digits one by one
    for token in CONTROL_TOKENS:
        assert tok.encode(f"a{token}b").ids == (vocab.index("a"), vocab.index(token), vocab.index("b"))
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == \
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_unknown_pre_tokenizer_is_refused(tmp_path):
    config = tiny()
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), pre="some-future-model")
    with pytest.raises(ModelLoadError, match="some-future-model"):
        load_gguf(path, device="cpu")


# ---- refusals -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    config = tiny()
    return write_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", config, weights_of(config), qtype=Q.Q8_0)


@pytest.mark.parametrize("keep", [0, 3, 24, 200, 0.5, -1])
def test_truncated_file_is_refused(tmp_path, tiny_file, keep):
    data = tiny_file.read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else (len(data) + keep if keep < 0 else keep)
    broken = tmp_path / "cut.gguf"
    broken.write_bytes(data[:cut])
    with pytest.raises(ModelLoadError, match="cut.gguf"):
        load_gguf(broken, device="cpu")


def test_not_a_gguf_and_missing_file(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("this is not a model\n" * 20)
    with pytest.raises(ModelLoadError, match="notes.gguf"):
        load_gguf(text)
    with pytest.raises(ModelLoadError, match="no GGUF file"):
        load_gguf(tmp_path / "absent.gguf")


def test_unsupported_architecture_is_named(tmp_path):
    config = tiny()
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), arch="gpt2")
    for read in (read_gguf_config, load_gguf):
        with pytest.raises(ModelLoadError, match=r"architecture 'gpt2' is not supported.*llama"):
            read(path)


def test_undequantizable_type_names_tensor_and_type(tmp_path):
    config = tiny()
    bad = {"blk.0.attn_norm.weight": np.arange(config.d_model, dtype=np.int32)}
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), extra=bad)
    with pytest.raises(ModelLoadError, match=r"blk\.0\.attn_norm\.weight.*I32"):
        load_gguf(path, device="cpu")


def test_unknown_tensor_is_refused_not_dropped(tmp_path):
    config = tiny()
    extra = {"rope_factors_long.weight": np.ones(config.head_dim // 2, dtype=np.float32)}  # LongRoPE's
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), extra=extra)
    with pytest.raises(ModelLoadError, match="rope_factors_long.weight"):
        load_gguf(path, device="cpu")


# ---- metadata of the wrong type: a clear refusal naming the key, never a TypeError -----------------
@pytest.fixture(scope="module")
def tiny_header(tiny_file):
    from txviz.loading.gguf.loader import read_gguf_header

    return read_gguf_header(tiny_file)


@pytest.mark.parametrize("key,value,message", [
    ("llama.block_count", "two", r"'llama\.block_count' must be an integer, got 'two'"),
    ("llama.embedding_length", [64, 64], r"'llama\.embedding_length' must be an integer"),
    ("llama.attention.head_count", 4.5, r"'llama\.attention\.head_count' must be an integer"),
    ("llama.rope.freq_base", "fast", r"'llama\.rope\.freq_base' must be a number"),
    ("llama.attention.layer_norm_rms_epsilon", float("nan"), "norm_eps must be > 0"),
    ("llama.rope.freq_base", float("inf"), "rope_theta must be > 0"),
    ("llama.context_length", True, r"'llama\.context_length' must be an integer"),
    ("llama.rope.scaling.type", 3, "RoPE scaling type '3' is not supported"),
])
def test_metadata_of_the_wrong_type_is_refused_by_name(tiny_header, key, value, message):
    from txviz.loading.gguf.loader import GGUFHeader, config_from_header

    header = GGUFHeader(tiny_header.path, {**tiny_header.metadata, key: value}, tiny_header.tensor_types)
    with pytest.raises(ModelLoadError, match=message):
        config_from_header(header)


@pytest.mark.parametrize("key,value,message", [
    ("tokenizer.chat_template", 3, "chat template must be text"),
    ("tokenizer.ggml.merges", [1, 2], "tokenizer metadata is unusable"),
    ("tokenizer.ggml.merges", ["Ġ nope"], "tokenizer metadata is unusable"),
    ("tokenizer.ggml.tokens", [1, 2, 3], "tokenizer metadata is unusable"),
])
def test_tokenizer_metadata_of_the_wrong_type_is_refused(tiny_header, key, value, message):
    from txviz.loading.gguf.loader import GGUFHeader, tokenizer_from_header

    header = GGUFHeader(tiny_header.path, {**tiny_header.metadata, key: value}, tiny_header.tensor_types)
    with pytest.raises(ModelLoadError, match=message):
        tokenizer_from_header(header)
