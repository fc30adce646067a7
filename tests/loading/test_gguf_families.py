"""The GGUF loader against transformers' own GGUF loader, family by family: a tiny random transformers model
is written as llama.cpp's converter would write it (tests/helpers/gguf_convert.py), in F32, F16 and Q8_0;
transformers loads that file (``from_pretrained(dir, gguf_file=…)``) and so does txviz, and the logits,
every attention map and (MoE) every layer's router logits must agree. Where transformers' GGUF loader does
not read what llama.cpp does (Phi-3's partial rotary, Llama 3's ``rope_freqs``), refuses the architecture (gemma,
olmoe) or reads another model (Mixtral, a llama file with experts, read as a dense llama), txviz is held to
transformers' eager model built from the original weights (as the file stores them) instead."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from torch.testing import assert_close

from tests.helpers import gguf_convert
from tests.helpers.gguf_convert import as_stored, vocab_size_for, write_model_gguf
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import random_ids, randomize_
from txviz.capture.trace import trace
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.families import SUPPORTED_ARCHITECTURES
from txviz.loading.gguf.loader import load_gguf

pytestmark = NEEDS_TRANSFORMERS

DIMS = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, rms_norm_eps=1e-5)
GEMMA_DIMS = dict(DIMS, num_key_value_heads=1, head_dim=256, sliding_window=8)  # 256: transformers' default
# query_pre_attn_scalar, which llama.cpp's head_dim**-0.5 equals only at that size

# Llama 3.1's rope scaling (its own numbers; 131072 positions, as transformers wants more than the original 8192)
LLAMA3_ROPE = dict(max_position_embeddings=131072, rope_parameters=dict(
    rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=8192))
# a wider head puts three pairs on the ramp between kept and divided frequencies, and other ramp ends
LLAMA3_ROPE_RAMP = dict(LLAMA3_ROPE, head_dim=64, rope_parameters=dict(
    LLAMA3_ROPE["rope_parameters"], factor=32.0, low_freq_factor=2.0, high_freq_factor=8.0))

# case → (llama.cpp arch, transformers model_type, config overrides)
CASES = {
    "llama": ("llama", "llama", dict(rope_theta=5000.0)),
    "llama_mqa_tied": ("llama", "llama", dict(num_key_value_heads=1, tie_word_embeddings=True)),
    "llama3_rope": ("llama", "llama", LLAMA3_ROPE),
    "llama3_rope_ramp": ("llama", "llama", LLAMA3_ROPE_RAMP),
    # llama.cpp's converter writes Mistral and Mixtral as "llama" (Mixtral with expert_count and stacked experts)
    "mistral": ("llama", "mistral", dict(sliding_window=None, head_dim=16)),
    "mistral_window": ("llama", "mistral", dict(sliding_window=4, head_dim=16)),
    "mixtral": ("llama", "mixtral", dict(num_local_experts=4, num_experts_per_tok=2, head_dim=16)),
    "qwen2": ("qwen2", "qwen2", dict(rope_theta=1e6)),
    "qwen2_tied": ("qwen2", "qwen2", dict(tie_word_embeddings=True)),
    "qwen3": ("qwen3", "qwen3", dict(head_dim=128)),  # transformers' GGUF loader reads no head size for qwen3
    # transformers' GGUF loader reads no expert width for qwen3moe: the model's is its default, 768
    "qwen3moe": ("qwen3moe", "qwen3_moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=768,
                                               head_dim=32, norm_topk_prob=True)),
    # and none for qwen2moe's experts and shared expert: theirs are its defaults, 1408 and 5632
    "qwen2moe": ("qwen2moe", "qwen2_moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=1408,
                                               shared_expert_intermediate_size=5632)),
    "olmoe": ("olmoe", "olmoe", dict(num_experts=4, num_experts_per_tok=2)),
    "phi3": ("phi3", "phi3", dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "phi3_window": ("phi3", "phi3", dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=8)),
    # Phi-3-mini-128k's LongRoPE: factors per rotated pair for long and for short sequences (8 pairs here)
    "phi3_longrope": ("phi3", "phi3", dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, max_position_embeddings=256,
                                           rope_parameters=dict(rope_type="longrope", rope_theta=10000.0,
                                                                long_factor=[1.0 + i for i in range(8)],
                                                                short_factor=[1.0] * 8,
                                                                original_max_position_embeddings=64))),
    "phi3_partial_rotary": ("phi3", "phi3", dict(pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                 partial_rotary_factor=0.75)),
    "gemma": ("gemma", "gemma", dict(GEMMA_DIMS, sliding_window=None)),
    "gemma2": ("gemma2", "gemma2", dict(GEMMA_DIMS, num_hidden_layers=4)),
    "gemma3": ("gemma3", "gemma3_text", dict(GEMMA_DIMS, num_hidden_layers=6, rope_theta=1e6)),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from intra-op threads; on a busy machine spinning threads slow them ~100x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def build(case: str, seed: int = 0) -> torch.nn.Module:
    """The case's transformers model: float32, eager attention, every parameter redrawn."""
    import transformers

    arch, model_type, overrides = CASES[case]
    config = transformers.AutoConfig.for_model(model_type, **{**DIMS, "vocab_size": vocab_size_for(arch),
                                                              **overrides})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.float32)
    return randomize_(model, seed).eval()


def transformers_gguf(path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                                dtype=torch.float32).eval()


def reference(hf_model, ids):
    """Logits (B, T, V), every attention map (L, B, H, T, S) and, for MoE, the router logits (L, B·T, E)."""
    moe = hasattr(hf_model.config, "num_experts_per_tok")
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True, output_router_logits=moe) if moe else \
            hf_model(ids, output_attentions=True)
    routers = torch.stack(out.router_logits) if moe else None
    return out.logits, torch.stack(out.attentions), routers


def ours(loaded, ids):
    moe = loaded.config.n_experts > 0
    result = trace(loaded.model, ids, capture=["logits", "attn_probs", *(["router_logits"] if moe else [])])
    routers = result["router_logits"].flatten(1, 2) if moe else None  # (L, B, T, E) -> (L, B·T, E)
    return result["logits"], result["attn_probs"], routers


def assert_same(expected, got) -> None:
    (expected_logits, expected_maps, expected_routers), (logits, maps, routers) = expected, got
    assert maps.shape == expected_maps.shape
    assert_close(maps, expected_maps)
    assert_close(logits, expected_logits)
    assert (routers is None) == (expected_routers is None)
    if routers is not None:
        assert_close(routers, expected_routers)


# what transformers' GGUF loader does not read as llama.cpp does: those cases are held to the original model
NOT_READ_BY_TRANSFORMERS = {"phi3_partial_rotary": "phi3.rope.dimension_count", "llama3_rope": "rope_freqs.weight",
                            "llama3_rope_ramp": "rope_freqs.weight"}
# architectures transformers' GGUF loader refuses: held to the original model too
NO_TRANSFORMERS_GGUF = ("gemma", "olmoe")
# what llama.cpp itself does not run, so the file's model differs from the checkpoint it was written from
NOT_RUN_BY_LLAMA_CPP = {"phi3_window": "phi3.attention.sliding_window",
                        "mistral_window": "sliding_window (the converter writes no window for llama)"}
# what transformers' GGUF loader reads as another model: a llama-arch file with experts (Mixtral) becomes a dense
# LlamaForCausalLM whose MLP is newly initialised, the experts dropped; held to the original model too
READ_AS_ANOTHER_MODEL = ("mixtral",)
# what txviz refuses by name
REFUSED = ("phi3_longrope",)
PARITY_CASES = sorted(set(CASES) - set(NOT_READ_BY_TRANSFORMERS) - set(NO_TRANSFORMERS_GGUF)
                      - set(READ_AS_ANOTHER_MODEL) - set(REFUSED))


@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0], ids=["F32", "Q8_0"])
@pytest.mark.parametrize("case", PARITY_CASES)
def test_logits_and_every_map_match_transformers_gguf_loader(case, qtype, tmp_path):
    arch = CASES[case][0]
    original = build(case)
    path = write_model_gguf(tmp_path / f"{case}.gguf", original, arch, qtype=qtype)
    hf_gguf = transformers_gguf(path)
    loaded = load_gguf(path, device="cpu")
    assert loaded.metadata["architecture"] == arch
    ids = random_ids(hf_gguf.config.vocab_size)
    expected = reference(hf_gguf, ids)
    assert_same(expected, ours(loaded, ids))
    if qtype == Q.F32 and case not in NOT_RUN_BY_LLAMA_CPP:  # the file is the model it was written from
        assert_same(reference(original, ids), expected)


@pytest.mark.parametrize("case", ["gemma3", "llama", "phi3", "qwen3"])
def test_f16_files_match_transformers_gguf_loader(case, tmp_path):
    path = write_model_gguf(tmp_path / f"{case}.gguf", build(case), CASES[case][0], qtype=Q.F16)
    hf_gguf, loaded = transformers_gguf(path), load_gguf(path, device="cpu")
    assert {"F16", "F32"} == set(loaded.metadata["tensor_types"])
    ids = random_ids(hf_gguf.config.vocab_size)
    assert_same(reference(hf_gguf, ids), ours(loaded, ids))


@pytest.mark.parametrize("case", sorted(NOT_READ_BY_TRANSFORMERS))
def test_what_transformers_gguf_loader_ignores_is_held_to_the_original_model(case, tmp_path):
    original = build(case)
    path = write_model_gguf(tmp_path / f"{case}.gguf", original, CASES[case][0])
    loaded = load_gguf(path, device="cpu")
    ids = random_ids(original.config.vocab_size)
    assert_same(reference(original, ids), ours(loaded, ids))
    with pytest.raises(AssertionError):  # the key matters here, and transformers' GGUF model lacks it
        assert_same(reference(transformers_gguf(path), ids), ours(loaded, ids))


@pytest.mark.parametrize("case", sorted(NOT_RUN_BY_LLAMA_CPP))
def test_a_window_llama_cpp_does_not_run_is_not_run(case, tmp_path):
    path = write_model_gguf(tmp_path / f"{case}.gguf", build(case), CASES[case][0])
    loaded = load_gguf(path, device="cpu")
    assert loaded.config.sliding_window is None and loaded.config.layer_windows == (None, None)


def test_an_unsupported_architecture_is_refused_naming_every_supported_one(tmp_path):
    path = write_model_gguf(tmp_path / "llama.gguf", build("llama"), "llama")
    data = path.read_bytes().replace(b"llama", b"mamba")  # general.architecture and every llama.* key
    (tmp_path / "mamba.gguf").write_bytes(data)
    with pytest.raises(ModelLoadError) as refused:
        load_gguf(tmp_path / "mamba.gguf", device="cpu")
    assert "'mamba' is not supported" in str(refused.value)
    assert all(arch in str(refused.value) for arch in SUPPORTED_ARCHITECTURES)


@pytest.mark.parametrize("case", sorted(NO_TRANSFORMERS_GGUF))
@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0], ids=["F32", "Q8_0"])
def test_what_transformers_gguf_loader_refuses_is_held_to_the_original_model(case, qtype, tmp_path):
    original = build(case)
    path = write_model_gguf(tmp_path / f"{case}.gguf", original, CASES[case][0], qtype=qtype)
    loaded = load_gguf(path, device="cpu")
    ids = random_ids(original.config.vocab_size)
    assert_same(reference(as_stored(original, qtype), ids), ours(loaded, ids))
    with pytest.raises(ValueError, match="not supported"):
        transformers_gguf(path)


def test_the_header_check_passes_a_file_of_every_supported_family(tmp_path):
    """The app offers a file only if its header check (txviz.loading.preflight, in a child process) passes."""
    from txviz.loading import preflight

    cases = {CASES[case][0]: case for case in sorted(set(CASES) - set(REFUSED))}
    assert set(cases) == set(SUPPORTED_ARCHITECTURES)
    paths = [write_model_gguf(tmp_path / f"{case}.gguf", build(case), arch) for arch, case in cases.items()]
    assert preflight.problems(paths) == {str(path): None for path in paths}


@pytest.mark.parametrize("case", ["llama3_rope", "llama3_rope_ramp"])
def test_llama3_rope_freqs_are_read_as_the_checkpoints_llama3_scaling(case, tmp_path):
    """The file stores only one divisor per pair; the scaling read back is the checkpoint's, and so are the
    frequencies the Positions page draws."""
    from txviz.analysis.positions.rope_kinds import layer_inv_freq

    original = build(case)
    params = original.config.rope_parameters
    path = write_model_gguf(tmp_path / f"{case}.gguf", original, "llama", qtype=Q.Q8_0)
    assert "rope_freqs.weight" in {t.name for t in gguf.GGUFReader(path).tensors}
    loaded = load_gguf(path, device="cpu")
    scaling = loaded.config.rope_scaling
    assert (scaling.kind, scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor) == \
        ("llama3", params["factor"], params["low_freq_factor"], params["high_freq_factor"])
    assert_close(layer_inv_freq(loaded.config, 0), original.model.rotary_emb.inv_freq)
    ids = random_ids(original.config.vocab_size)
    assert_same(reference(as_stored(original, Q.Q8_0), ids), ours(loaded, ids))


def test_a_llama3_file_passes_the_header_check_and_keeps_its_scaling_in_the_float32_copy(tmp_path):
    from txviz.loading import preflight
    from txviz.loading.gguf.float32_copy import dequantized_copy_path, load_gguf_cached

    path = write_model_gguf(tmp_path / "llama3_copy.gguf", build("llama3_rope_ramp"), "llama")
    assert preflight.problems([path]) == {str(path): None}
    first = load_gguf_cached(path, device="cpu")
    again = load_gguf_cached(path, device="cpu")
    assert again.metadata["weights_from"] == str(dequantized_copy_path(path))
    assert again.config.rope_scaling == first.config.rope_scaling
    assert again.config.rope_scaling.kind == "llama3"


def test_rope_freqs_that_are_not_llama3_scaling_are_refused(tmp_path):
    """Divisors below 1 (pairs sped up) follow no rule txviz runs: refused, not run as some other scaling."""
    original = build("llama3_rope")
    path = write_model_gguf(tmp_path / "llama3.gguf", original, "llama")
    freqs = gguf_convert.llama3_rope_freqs(original.config)
    data = path.read_bytes()
    assert data.count(freqs.tobytes()) == 1
    (tmp_path / "sped_up.gguf").write_bytes(data.replace(freqs.tobytes(), (freqs / 16).tobytes()))
    with pytest.raises(ModelLoadError, match="rope_freqs.weight speeds some pairs up"):
        load_gguf(tmp_path / "sped_up.gguf", device="cpu")


@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0], ids=["F32", "Q8_0"])
def test_mixtral_is_held_to_the_original_model_as_transformers_gguf_loader_drops_its_experts(qtype, tmp_path):
    original = build("mixtral")
    path = write_model_gguf(tmp_path / "mixtral.gguf", original, "llama", qtype=qtype)
    loaded = load_gguf(path, device="cpu")
    assert (loaded.metadata["architecture"], loaded.config.n_experts, loaded.config.top_k) == ("llama", 4, 2)
    ids = random_ids(original.config.vocab_size)
    assert_same(reference(as_stored(original, qtype), ids), ours(loaded, ids))
    hf_gguf = transformers_gguf(path)
    assert hf_gguf.config.model_type == "llama" and not hasattr(hf_gguf.config, "num_local_experts")


def test_phi3_longrope_is_refused_by_name_by_the_loader_and_the_header_check(tmp_path):
    from txviz.loading import preflight

    path = write_model_gguf(tmp_path / "phi3_longrope.gguf", build("phi3_longrope"), "phi3")
    assert {"rope_factors_long.weight", "rope_factors_short.weight"} <= {t.name for t in gguf.GGUFReader(path).tensors}
    with pytest.raises(ModelLoadError, match="LongRoPE .*rope_factors_long.weight, rope_factors_short.weight"):
        load_gguf(path, device="cpu")
    assert "LongRoPE" in preflight.problems([path])[str(path)]


@pytest.mark.parametrize("values, refusal", [(5000, "holds 5,000 values, more than any head"),
                                             (3, "must hold 8 positive finite divisors")])
def test_a_rope_freqs_tensor_of_the_wrong_size_is_refused_before_it_is_used(values, refusal, tmp_path):
    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf

    config = tiny()
    assert config.head_dim // 2 == 8
    extra = {"rope_freqs.weight": np.full(values, 2.0, dtype=np.float32)}
    path = write_gguf(tmp_path / "m.gguf", config, weights_of(config), extra=extra)
    with pytest.raises(ModelLoadError, match=refusal):
        load_gguf(path, device="cpu")
