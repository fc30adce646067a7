"""gpt-oss from Hugging Face directories, against transformers' GptOssForCausalLM (eager): logits, every
attention map (over real tokens: transformers drops the sink's column), the sinks' share, the router's
logits, choices and gates, on a prompt three sliding windows long; the parameter count; both RoPE
spellings and the defaults a config may leave out."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers import tiny_gpt_oss
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_gpt_oss import SEQ_LEN, WINDOW
from tests.helpers.tiny_hf import edit_config, legacy_rope_spelling, random_ids, save
from txviz.capture.trace import trace
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir, read_hf_config

pytestmark = NEEDS_TRANSFORMERS

ROUTING = ["router_logits", "router_probs", "expert_ids", "expert_gates"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def reference(hf_model, ids):
    """transformers' logits, maps (L, B, H, T, S), and each layer's router outputs (logits, gates, chosen)."""
    routed = []
    hooks = [layer.mlp.router.register_forward_hook(lambda module, args, out: routed.append(out))
             for layer in hf_model.model.layers]
    try:
        with torch.no_grad():
            out = hf_model(ids, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    return out.logits, torch.stack(out.attentions), routed


@pytest.fixture(scope="module", params=sorted(tiny_gpt_oss.VARIANTS))
def pair(request, tmp_path_factory):
    hf_model = tiny_gpt_oss.build(request.param)
    loaded = load_hf_dir(save(hf_model, tmp_path_factory.mktemp(request.param)), device="cpu")
    ids = random_ids(hf_model.config.vocab_size)
    captured = trace(loaded.model, ids, capture=["logits", "attn_probs", "attn_sink", *ROUTING])
    return hf_model, loaded, ids, captured, reference(hf_model, ids)


def test_logits_and_every_attention_map_equal_transformers_eager(pair):
    _, _, _, captured, (logits, maps, _) = pair
    assert captured["attn_probs"].shape == maps.shape == (4, 2, 4, SEQ_LEN, SEQ_LEN)
    assert_close(captured["attn_probs"], maps, atol=1e-5, rtol=0)
    assert_close(captured["logits"], logits, atol=1e-4, rtol=0)


def test_the_sinks_share_is_what_transformers_maps_leave_out(pair):
    """transformers returns the weights over real keys only: a row's shortfall from 1 is the sink's."""
    _, _, _, captured, (_, maps, _) = pair
    assert_close(captured["attn_sink"], 1 - maps.sum(-1), atol=1e-5, rtol=0)
    assert float(captured["attn_sink"].max()) > 0.1  # the sinks take a visible share of some rows


def test_the_router_logits_choices_and_gates_equal_transformers(pair):
    _, _, ids, captured, (_, _, routed) = pair
    for layer, (logits, gates, chosen) in enumerate(routed):
        shape = (*ids.shape, -1)
        assert_close(captured["router_logits"][layer], logits.reshape(shape), atol=1e-5, rtol=0)
        assert torch.equal(captured["expert_ids"][layer], chosen.reshape(shape))
        assert_close(captured["expert_gates"][layer], gates.reshape(shape), atol=1e-5, rtol=0)
        assert_close(captured["router_probs"][layer], torch.softmax(logits, -1).reshape(shape), atol=1e-5, rtol=0)


def test_the_plain_call_agrees_too(pair):
    """Without capture the fused kernel runs, the sink as one more key."""
    hf_model, loaded, ids, _, (logits, _, _) = pair
    with torch.no_grad():
        assert_close(loaded.model(ids), logits, atol=1e-4, rtol=1e-4)


def test_the_window_is_in_force_on_sliding_layers_only(pair):
    hf_model, _, _, captured, _ = pair
    distance = torch.arange(SEQ_LEN)[:, None] - torch.arange(SEQ_LEN)[None, :]
    beyond = distance >= WINDOW
    for layer, kind in enumerate(hf_model.config.layer_types):
        mass = captured["attn_probs"][layer][..., beyond].abs().max()
        assert (mass == 0) if kind == "sliding_attention" else (mass > 1e-3), (layer, kind)


def test_the_parameter_count_equals_transformers(pair):
    hf_model, loaded, _, _, _ = pair
    assert loaded.n_params == hf_model.num_parameters()


def test_the_config_reads_sinks_windows_yarn_and_the_moe(pair):
    hf_model, loaded, _, _, _ = pair
    c, hf = loaded.config, hf_model.config
    assert (c.attn_sinks, c.router_order, c.router_bias, c.ffn, c.mlp_bias) == (
        True, "topk_softmax", True, "swiglu_clamped", True)
    assert (c.swiglu_alpha, c.swiglu_limit, c.n_experts, c.top_k) == (
        hf.swiglu_alpha, hf.swiglu_limit, hf.num_local_experts, hf.num_experts_per_tok)
    assert c.layer_types == tuple(t.removesuffix("_attention") for t in hf.layer_types)
    assert (c.rope_scaling.kind, c.rope_scaling.truncate) == ("yarn", hf.rope_parameters["truncate"])


def test_the_legacy_rope_spelling_reads_the_same(tmp_path):
    directory = save(tiny_gpt_oss.build(), tmp_path)
    expected = read_hf_config(directory)
    edit_config(directory, legacy_rope_spelling)
    assert read_hf_config(directory) == expected


def test_a_config_that_leaves_out_layer_types_and_rope_gets_transformers_defaults():
    import transformers

    raw = {"model_type": "gpt_oss", "vocab_size": 160, "hidden_size": 64, "intermediate_size": 32,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2}
    config = read_hf_config(raw)
    hf = transformers.GptOssConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    assert config.layer_types == tuple(t.removesuffix("_attention") for t in hf.layer_types)
    assert (config.sliding_window, config.max_seq_len, config.rope_theta) == (
        hf.sliding_window, hf.max_position_embeddings, hf.rope_parameters["rope_theta"])
    assert (config.rope_scaling.factor, config.rope_scaling.original_max_seq_len, config.rope_scaling.truncate) == (
        32.0, 4096, False)


def test_a_fused_expert_tensor_of_the_wrong_shape_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    directory = save(tiny_gpt_oss.build(), tmp_path)
    tensors = load_file(directory / "model.safetensors")
    tensors["model.layers.1.mlp.experts.down_proj"] = tensors["model.layers.1.mlp.experts.down_proj"][:, :16].contiguous()
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="down_proj: shape"):
        load_hf_dir(directory, device="cpu")
