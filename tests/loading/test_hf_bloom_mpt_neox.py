"""BLOOM, MPT, GPT-NeoX and Phi-3 checkpoints against transformers itself: tiny random models saved with
``save_pretrained`` (safetensors), loaded through txviz, must give the same logits and the same
attention map in every layer and head (ALiBi, partial rotary, the parallel block, fused q/k/v
layouts). Then the ALiBi slopes of both families against transformers' own builders, and refusals."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import WINDOW, build, edit_config, random_ids, save, variants_of
from txviz.capture.trace import trace
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir, read_hf_config
from txviz.model.positions import alibi_slopes

pytestmark = NEEDS_TRANSFORMERS

VARIANTS = variants_of("bloom", "mpt", "gpt_neox", "phi3")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def reference(hf_model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True, use_cache=False)
    return out.logits, torch.stack(out.attentions)


@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_and_every_attention_map_match_transformers(variant, tmp_path):
    hf_model = build(variant)
    loaded = load_hf_dir(save(hf_model, tmp_path), device="cpu")
    assert loaded.metadata["architecture"] == hf_model.config.architectures[0]
    ids = random_ids(hf_model.config.vocab_size)
    expected_logits, expected_attn = reference(hf_model, ids)
    tr = trace(loaded.model, ids, capture=["logits", "attn_probs"])
    assert tr["attn_probs"].shape == expected_attn.shape  # (L, B, H, T, S)
    assert_close(tr["attn_probs"], expected_attn)
    assert_close(tr["logits"], expected_logits)


@pytest.mark.parametrize("variant, field, expected", [
    ("bloom", "embed_norm", True), ("bloom", "positions", "alibi"), ("mpt", "norm_bias", False),
    ("mpt", "qkv_bias", False), ("gpt_neox_parallel", "parallel_block", True),
    ("gpt_neox_parallel", "rotary_dims", 4), ("gpt_neox_sequential", "parallel_block", False),
    ("gpt_neox_full_rotary_no_bias", "rotary_dims", None), ("gpt_neox_half_rotary_gelu_new", "rotary_dims", 8),
    ("phi3_partial_window", "rotary_dims", 12), ("phi3_partial_window", "sliding_window", WINDOW),
])
def test_configs_read_the_family_options(variant, field, expected, tmp_path):
    build(variant).config.save_pretrained(tmp_path)
    assert getattr(read_hf_config(tmp_path), field) == expected


@pytest.mark.parametrize("n_heads", [1, 2, 4, 6, 8, 12, 16, 24, 32])
def test_alibi_slopes_equal_bloom_and_mpt_builders(n_heads):
    """BLOOM adds slope·j and MPT slope·(j − S + 1): read the slope off key 1 minus key 0."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    bloom = build_alibi_tensor(torch.ones(1, 3, dtype=torch.long), n_heads, torch.float32)  # (H, 1, 3)
    assert_close(alibi_slopes(n_heads), bloom[:, 0, 1] - bloom[:, 0, 0])
    for bias_max in (8, 4, 12):
        mpt = build_mpt_alibi_tensor(n_heads, 3, alibi_bias_max=bias_max)  # (H, 1, 3)
        assert_close(alibi_slopes(n_heads, bias_max), mpt[:, 0, 1] - mpt[:, 0, 0])


def test_mpt_alibi_bias_max_is_read(tmp_path):
    build("mpt").config.save_pretrained(tmp_path)
    edit_config(tmp_path, lambda c: {**c, "attn_config": {**c["attn_config"], "alibi_bias_max": 16}})
    assert read_hf_config(tmp_path).alibi_bias_max == 16


@pytest.mark.parametrize("variant, edit, message", [
    ("bloom", lambda c: {**c, "apply_residual_connection_post_layernorm": True}, "post_layernorm"),
    ("mpt", lambda c: {**c, "attn_config": {**c["attn_config"], "clip_qkv": 6.0}}, "clip_qkv"),
    ("mpt", lambda c: {**c, "attn_config": {**c["attn_config"], "alibi": False}}, "alibi=false"),
    ("mpt", lambda c: {**c, "no_bias": False}, "no_bias"),
    ("gpt_neox_parallel", lambda c: {**c, "hidden_act": "relu"}, "hidden_act"),
    ("phi3", lambda c: {**c, "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, "longrope"),
])
def test_unsupported_options_are_refused_by_name(variant, edit, message, tmp_path):
    build(variant).config.save_pretrained(tmp_path)
    edit_config(tmp_path, edit)
    with pytest.raises(ModelLoadError, match=message):
        read_hf_config(tmp_path)


@pytest.mark.parametrize("variant, edit", [
    ("gpt_neox_parallel", lambda c: {**c, "hidden_size": 32}),
    ("bloom", lambda c: {**c, "hidden_size": 24}),
    ("mpt", lambda c: {**c, "d_model": 24}),
    ("phi3", lambda c: {**c, "num_key_value_heads": 4}),
])
def test_a_fused_qkv_that_does_not_fit_the_config_is_refused(variant, edit, tmp_path):
    save(build(variant), tmp_path)
    edit_config(tmp_path, edit)
    with pytest.raises(ModelLoadError, match="fused q/k/v"):
        load_hf_dir(tmp_path, device="cpu")


def save_renamed(hf_model, directory, rename, extra=None) -> None:
    """The checkpoint as older tools wrote it: names changed by ``rename``, buffers ``extra`` added."""
    from safetensors.torch import save_file

    hf_model.config.save_pretrained(directory)
    tensors = {rename(name): t.detach().clone().contiguous() for name, t in hf_model.state_dict().items()}
    save_file({**tensors, **(extra or {})}, str(directory / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("variant, rename, extra", [
    ("bloom_8_heads_untied", lambda n: n.removeprefix("transformer."), None),  # bigscience's own layout
    ("gpt_neox_parallel", lambda n: n.replace("lm_head.", "embed_out."),  # EleutherAI's, with its buffers
     {"gpt_neox.layers.0.attention.bias": torch.ones(1, 1, 4, 4, dtype=torch.bool),
      "gpt_neox.layers.0.attention.masked_bias": torch.tensor(-1e9),
      "gpt_neox.layers.0.attention.rotary_emb.inv_freq": torch.ones(2)}),
])
def test_published_layouts_load_to_the_same_model(variant, rename, extra, tmp_path):
    hf_model = build(variant)
    save_renamed(hf_model, tmp_path, rename, extra)
    loaded = load_hf_dir(tmp_path, device="cpu")
    ids = random_ids(hf_model.config.vocab_size)
    assert_close(loaded.model(ids), reference(hf_model, ids)[0])
