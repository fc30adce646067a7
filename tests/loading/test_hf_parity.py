"""The HF loader against transformers itself: tiny random checkpoints of every supported family are
saved with ``save_pretrained`` (safetensors), loaded through txviz, and must give the same logits and
the same attention map in every layer and head. Then the layouts (sharded, fused Mixtral experts,
the transformers 4.x config spelling), the errors, and config-only reading of published configs."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from tests.helpers.published_hf_configs import (GPT2_SMALL, LLAMA_2_7B, LLAMA_3_1_8B, LLAMA_3_8B,
                                                MISTRAL_7B_V01, MISTRAL_7B_V03, MIXTRAL_8X7B, QWEN2_0_5B, QWEN2_5_7B_YARN,
                                                QWEN2_7B, SMOLLM2_135M, TRANSFORMERS_5_LLAMA)
from tests.helpers.broken_checkpoints import BROKEN
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import (SLIDING, WINDOW, build, edit_config, legacy_rope_spelling, random_ids, save,
                                   save_state_dict, variants_of)
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir, read_hf_config
from txviz.loading.hf.config import CONFIG_READERS, SUPPORTED
from txviz.loading.hf.names import LAYOUTS
from txviz.capture.trace import trace

pytestmark = NEEDS_TRANSFORMERS

# the Llama-shaped families and GPT-2 (Gemma, BLOOM, MPT, GPT-NeoX and Phi-3 have files of their own)
VARIANTS = variants_of("llama", "mistral", "qwen2", "mixtral", "gpt2")
ROPE_VARIANTS = [v for v in VARIANTS if "rope" in v or "theta" in v]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy machine the spinning threads
    make every forward ~100x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def reference(hf_model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' logits (B, T, V) and attention maps stacked over layers (L, B, H, T, S)."""
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True)
    return out.logits, torch.stack(out.attentions)


def ours(loaded, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    tr = trace(loaded.model, ids, capture=["logits", "attn_probs"])
    return tr["logits"], tr["attn_probs"]


def assert_parity(hf_model, loaded, seed: int = 0) -> None:
    ids = random_ids(hf_model.config.vocab_size, seed=seed)
    expected_logits, expected_attn = reference(hf_model, ids)
    logits, attn = ours(loaded, ids)
    assert attn.shape == expected_attn.shape
    assert_close(attn, expected_attn)
    assert_close(logits, expected_logits)


# ---- parity -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_and_every_attention_map_match_transformers(variant, tmp_path):
    hf_model = build(variant)
    loaded = load_hf_dir(save(hf_model, tmp_path), device="cpu")
    assert loaded.format == "hf" and loaded.tokenizer is None
    assert loaded.metadata["architecture"] == hf_model.config.architectures[0]
    assert_parity(hf_model, loaded)


@pytest.mark.parametrize("variant", sorted(SLIDING))
def test_sliding_window_is_in_force(variant, tmp_path):
    loaded = load_hf_dir(save(build(variant), tmp_path), device="cpu")
    assert loaded.config.sliding_window == WINDOW
    probs = ours(loaded, random_ids(loaded.config.vocab_size))[1]  # (L, B, H, T, S)
    query, key = torch.meshgrid(torch.arange(probs.shape[-2]), torch.arange(probs.shape[-1]), indexing="ij")
    too_far = query - key >= WINDOW
    assert too_far.any()
    assert (probs[..., too_far] == 0).all()


@pytest.mark.parametrize("variant", ROPE_VARIANTS)
def test_transformers_4_rope_spelling_loads_the_same(variant, tmp_path):
    hf_model = build(variant)
    save(hf_model, tmp_path)
    modern = load_hf_dir(tmp_path, device="cpu").config
    edit_config(tmp_path, legacy_rope_spelling)
    assert "rope_parameters" not in json.loads((tmp_path / "config.json").read_text())
    loaded = load_hf_dir(tmp_path, device="cpu")
    assert (loaded.config.rope_theta, loaded.config.rope_scaling) == (modern.rope_theta, modern.rope_scaling)
    assert_parity(hf_model, loaded)


def test_mixtral_fused_expert_layout_loads_like_the_per_expert_one(tmp_path):
    hf_model = build("mixtral")
    fused = load_hf_dir(save_state_dict(hf_model, tmp_path / "fused"), device="cpu")
    classic = load_hf_dir(save(hf_model, tmp_path / "classic"), device="cpu")
    assert any(".mlp.experts.gate_up_proj" in name for name in hf_model.state_dict())  # the premise
    assert "unfuse_experts" in fused.metadata["transforms"]
    for name, tensor in classic.model.state_dict().items():
        assert torch.equal(fused.model.state_dict()[name], tensor), name
    assert_parity(hf_model, fused)


def _bare_gpt2_with_mask_buffers(tensors: dict, config) -> dict:
    """openai-community/gpt2's layout: no ``transformer.`` prefix, causal-mask buffers stored."""
    n = config.n_positions
    out = {name.removeprefix("transformer."): t for name, t in tensors.items()}
    for i in range(config.n_layer):
        out[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return out


def _rotary_buffers(tensors: dict, config) -> dict:
    """Early Llama conversions stored each layer's RoPE inv_freq."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, 16, 2).float() / 16)
    return {**tensors, **{f"model.layers.{i}.self_attn.rotary_emb.inv_freq": inv_freq.clone()
                          for i in range(config.num_hidden_layers)}}


def _stored_tied_head(tensors: dict, config) -> dict:
    """Some tied checkpoints store the embedding a second time, as lm_head.weight."""
    return {**tensors, "lm_head.weight": tensors["model.embed_tokens.weight"].clone()}


OLD_LAYOUTS = {"gpt2": _bare_gpt2_with_mask_buffers, "llama_gqa": _rotary_buffers, "llama_tied": _stored_tied_head}


@pytest.mark.parametrize("variant", sorted(OLD_LAYOUTS))
def test_older_checkpoint_layouts_load(variant, tmp_path):
    hf_model = build(variant)
    save(hf_model, tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    save_file(OLD_LAYOUTS[variant](tensors, hf_model.config), tmp_path / "model.safetensors")
    assert_parity(hf_model, load_hf_dir(tmp_path, device="cpu"))


@pytest.mark.parametrize("variant", ["llama_gqa", "mixtral", "gpt2"])
def test_sharded_checkpoint_loads_identically(variant, tmp_path):
    hf_model = build(variant)
    single = load_hf_dir(save(hf_model, tmp_path / "single"), device="cpu")
    sharded = load_hf_dir(save(hf_model, tmp_path / "sharded", max_shard_size="40KB"), device="cpu")
    assert len(sharded.metadata["files"]) > 1
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    assert single.model.state_dict().keys() == sharded.model.state_dict().keys()
    for name, tensor in single.model.state_dict().items():
        assert torch.equal(sharded.model.state_dict()[name], tensor), name


def test_dtype_and_device_are_honoured(tmp_path):
    loaded = load_hf_dir(save(build("qwen2"), tmp_path), device="cpu", dtype=torch.bfloat16)
    assert loaded.dtype == torch.bfloat16 and loaded.device == torch.device("cpu")


def test_tokenizer_and_its_special_tokens_come_along(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<s>": 0, "</s>": 1, "[unk]": 2, "hello": 3, "world": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[unk]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    save(build("llama_gqa"), tmp_path)
    backend.save(str(tmp_path / "tokenizer.json"))
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>",
        "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": template}]}))
    loaded = load_hf_dir(tmp_path, device="cpu")
    assert (loaded.tokenizer.bos_token, loaded.tokenizer.eos_token) == ("<s>", "</s>")
    assert loaded.tokenizer.chat_template == template == loaded.metadata["chat_template"]
    assert loaded.tokenizer.encode("hello world").ids == (3, 4)


def test_chat_template_jinja_file_is_read(tmp_path):
    from tokenizers import Tokenizer, models

    save(build("qwen2"), tmp_path)
    Tokenizer(models.WordLevel({"a": 0, "[unk]": 1}, unk_token="[unk]")).save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    tokenizer = load_hf_dir(tmp_path, device="cpu").tokenizer
    assert tokenizer.bos_token is None and tokenizer.chat_template == "{{ messages[0]['content'] }}"


def test_the_family_tables_agree():
    assert set(SUPPORTED) == set(CONFIG_READERS) == set(LAYOUTS)


# ---- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_checkpoints_raise_a_clear_error(case, tmp_path):
    setup, message = BROKEN[case]
    setup(tmp_path)
    with pytest.raises(ModelLoadError, match=message):
        load_hf_dir(tmp_path, device="cpu")
    assert not (tmp_path / "UNPICKLED").exists()


# ---- config.json only ---------------------------------------------------------------------------
PUBLISHED = {  # config → the fields it must give
    "llama-2-7b": (LLAMA_2_7B, dict(n_layers=32, n_heads=32, n_kv_heads=32, d_model=4096, ffn_hidden=11008,
                                    vocab_size=32000, max_seq_len=4096, rope_theta=10000.0, norm_eps=1e-5)),
    "llama-3-8b": (LLAMA_3_8B, dict(n_layers=32, n_heads=32, n_kv_heads=8, d_model=4096, ffn_hidden=14336,
                                    head_dim=128, rope_theta=500000.0, vocab_size=128256, attention_kind="GQA")),
    "llama-3.1-8b": (LLAMA_3_1_8B, dict(rope_theta=500000.0, max_seq_len=131072,
                                        rope_scaling=dict(kind="llama3", factor=8.0, original_max_seq_len=8192,
                                                          low_freq_factor=1.0, high_freq_factor=4.0))),
    "llama-3.1-8b-transformers-5": (TRANSFORMERS_5_LLAMA, dict(rope_theta=500000.0, n_kv_heads=8,
                                                               rope_scaling=dict(kind="llama3", factor=8.0))),
    "smollm2-135m": (SMOLLM2_135M, dict(n_layers=30, n_heads=9, n_kv_heads=3, d_model=576, head_dim=64,
                                        tie_embeddings=True, rope_theta=100000.0)),
    "mistral-7b-v0.1": (MISTRAL_7B_V01, dict(n_kv_heads=8, sliding_window=4096, ffn_hidden=14336, qkv_bias=False)),
    "mistral-7b-v0.3": (MISTRAL_7B_V03, dict(sliding_window=None, rope_theta=1e6, vocab_size=32768)),
    "mixtral-8x7b": (MIXTRAL_8X7B, dict(n_experts=8, top_k=2, router_norm="topk", ffn_hidden=14336,
                                        rope_theta=1e6, sliding_window=None, is_moe=True)),
    "qwen2-7b": (QWEN2_7B, dict(n_heads=28, n_kv_heads=4, d_model=3584, qkv_bias=True, out_bias=False,
                                sliding_window=None, norm_eps=1e-6, vocab_size=152064)),
    "qwen2-0.5b": (QWEN2_0_5B, dict(n_heads=14, n_kv_heads=2, head_dim=64, tie_embeddings=True, qkv_bias=True)),
    "qwen2.5-7b-yarn": (QWEN2_5_7B_YARN, dict(rope_scaling=dict(kind="yarn", factor=4.0,
                                                                original_max_seq_len=32768))),
    "gpt2": (GPT2_SMALL, dict(n_layers=12, n_heads=12, d_model=768, ffn_hidden=3072, positions="learned",
                              norm="layernorm", ffn="gelu_mlp", gelu_approximate="tanh", max_seq_len=1024,
                              tie_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True)),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_read_hf_config_on_published_configs(name):
    raw, expected = PUBLISHED[name]
    config = read_hf_config(raw)
    for field, value in expected.items():
        actual = getattr(config, field)
        if field == "rope_scaling":
            actual = {key: getattr(actual, key) for key in value}
        assert actual == value, field


@pytest.mark.parametrize("form", ["dict", "file", "directory", "bytes", "text"])
def test_read_hf_config_takes_every_form_of_a_config(form, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_3_8B))
    source = {"dict": LLAMA_3_8B, "file": tmp_path / "config.json", "directory": str(tmp_path),
              "bytes": json.dumps(LLAMA_3_8B).encode(), "text": json.dumps(LLAMA_3_8B)}[form]
    config = read_hf_config(source, name="llama-3-8b")
    assert config == read_hf_config(LLAMA_3_8B, name="llama-3-8b").replace(source=config.source)
    if form in ("file", "directory"):
        assert read_hf_config(source).name == tmp_path.name


BAD_CONFIGS = {
    "no_layers": ({**LLAMA_3_8B, "num_hidden_layers": None}, "num_hidden_layers"),
    "bool_as_count": ({**LLAMA_3_8B, "num_hidden_layers": True}, "num_hidden_layers"),
    "absurd_size": ({**LLAMA_3_8B, "hidden_size": 10 ** 30}, "hidden_size"),
    "negative_heads": ({**LLAMA_3_8B, "num_attention_heads": -4}, "num_attention_heads"),
    "nan_eps": ({**LLAMA_3_8B, "rms_norm_eps": float("nan")}, "rms_norm_eps"),
    "gelu_llama": ({**LLAMA_3_8B, "hidden_act": "gelu"}, "hidden_act"),
    "no_model_type": ({k: v for k, v in LLAMA_3_8B.items() if k not in ("model_type", "architectures")},
                      "supported"),
    "unknown_family": ({"model_type": "falcon", "architectures": ["FalconForCausalLM"]}, "LlamaForCausalLM"),
    "rope_not_a_dict": ({**LLAMA_3_8B, "rope_scaling": "linear"}, "rope"),
    "gpt2_inverse_layer_scaling": ({**GPT2_SMALL, "scale_attn_by_inverse_layer_idx": True}, "1/sqrt"),
    "deep_nesting": (b"[" * 100_000 + b"]" * 100_000, "JSON"),
    "not_utf8": (b"{\xff\xfe}", "JSON"),
    "nul_in_path": ("models/\x00config.json", "no config.json"),
    "no_such_path": ("/nonexistent/config.json", "no config.json"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_read_hf_config_refuses_malformed_configs(case):
    source, message = BAD_CONFIGS[case]
    with pytest.raises(ModelLoadError, match=message):
        read_hf_config(source)
