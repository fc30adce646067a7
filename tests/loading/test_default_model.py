"""The default model (SmolLM2-135M-Instruct from its GGUF) against transformers' own GGUF loading:
config, logits, all 30×9 attention maps, greedy generation; and the cached float32 copy against the GGUF."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.hf_reference import _plain_array_reader, gguf_read_once, needs_transformers
from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.generate import generate
from txviz.loading.gguf.loader import load_gguf
from txviz.capture.trace import trace

pytestmark = pytest.mark.default_model
TOLERANCE = 1e-4  # fp32; the eager paths agree far more closely in practice


@pytest.fixture(scope="module")
def hf_model(default_gguf_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers needs accelerate to load GGUF files")
    with gguf_read_once():  # one read of the file for config and weights (tests/helpers/hf_reference.py)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            default_gguf_path.parent, gguf_file=default_gguf_path.name, attn_implementation="eager",
            dtype=torch.float32)
    return model.eval()


def prompts(tokenizer) -> dict[str, tuple[int, ...]]:
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    return {
        "chat": tokenizer.encode(chat).ids,
        "sink": tokenizer.encode("The trophy didn't fit in the suitcase because it was too big.", bos="sink").ids,
        "digits_no_bos": tokenizer.encode("In 1969, 3 astronauts flew 384400 km to the Moon.").ids,
    }


@needs_transformers  # on the transformers worker: its reference is built once per session
def test_config_agrees_with_transformers(default_model, hf_model):
    ours, theirs = default_model.config, hf_model.config
    assert (ours.n_layers, ours.d_model, ours.ffn_hidden) == (theirs.num_hidden_layers, theirs.hidden_size,
                                                              theirs.intermediate_size)
    assert (ours.n_heads, ours.n_kv_heads, ours.head_dim) == (theirs.num_attention_heads, theirs.num_key_value_heads,
                                                              theirs.head_dim)
    assert ours.vocab_size == theirs.vocab_size and ours.tie_embeddings == theirs.tie_word_embeddings
    assert ours.rope_theta == pytest.approx(theirs.rope_parameters["rope_theta"])
    assert ours.norm_eps == pytest.approx(theirs.rms_norm_eps)
    assert ours.max_seq_len == theirs.max_position_embeddings


@needs_transformers  # on the transformers worker: its reference is built once per session
@pytest.mark.parametrize("name", ["chat", "sink", "digits_no_bos"])
def test_logits_and_every_attention_map_match_transformers(default_model, hf_model, name):
    ids = torch.tensor([prompts(default_model.tokenizer)[name]])
    ours = trace(default_model.model, ids, capture=("attn_probs", "logits"))
    with torch.inference_mode():
        theirs = hf_model(ids, output_attentions=True)
    reference_maps = torch.stack(theirs.attentions)  # (L, B, H, T, S)
    config = default_model.config
    assert ours["attn_probs"].shape == reference_maps.shape == (config.n_layers, 1, config.n_heads,
                                                                ids.shape[1], ids.shape[1])
    logit_diff = (ours["logits"] - theirs.logits).abs().max().item()
    map_diff = (ours["attn_probs"] - reference_maps).abs().max().item()
    assert logit_diff <= TOLERANCE and map_diff <= TOLERANCE, (logit_diff, map_diff)


@needs_transformers  # on the transformers worker: its reference is built once per session
def test_greedy_generation_matches_transformers(default_model, hf_model):
    tokenizer = default_model.tokenizer
    ids = prompts(tokenizer)["chat"]
    ours = generate(default_model.model, ids, 20, stop_ids=[tokenizer.eos_id])
    with torch.inference_mode():
        theirs = hf_model.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False,
                                   eos_token_id=tokenizer.eos_id, pad_token_id=tokenizer.eos_id)
    assert list(ours.new_ids) == theirs[0, len(ids):].tolist()
    assert "Paris" in tokenizer.decode(ours.new_ids)


def test_cached_float32_copy_equals_the_gguf(default_model, default_gguf_path):
    fresh = load_gguf(default_gguf_path, device="cpu")
    cached = default_model.model.state_dict()
    assert fresh.config == default_model.config
    for name, value in fresh.model.state_dict().items():
        assert torch.equal(value, cached[name]), name
    assert fresh.tokenizer.encode("Hello 123 😀").ids == default_model.tokenizer.encode("Hello 123 😀").ids


def test_the_references_reader_reads_what_the_gguf_package_reads(tmp_path):
    """gguf_read_once's reader (gguf's own parser over a plain ndarray view) against gguf.GGUFReader itself,
    on a small file with a vocabulary, merges and quantized tensors: every key/value part and tensor alike."""
    import gguf
    import numpy as np

    config = tiny()
    path = write_gguf(tmp_path / "tiny.gguf", config, weights_of(config), qtype=gguf.GGMLQuantizationType.Q8_0)
    package, ours = gguf.GGUFReader(path), _plain_array_reader(gguf.GGUFReader)(path)
    assert type(ours.data) is np.ndarray and np.array_equal(ours.data, package.data)
    assert list(ours.fields) == list(package.fields) and len(package.fields["tokenizer.ggml.tokens"].data) > 200
    for name, field in package.fields.items():
        other = ours.fields[name]
        assert (other.offset, other.types, other.data, other.contents()) == (field.offset, field.types, field.data,
                                                                              field.contents()), name
        assert len(other.parts) == len(field.parts), name
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(other.parts, field.parts)), name
    assert [(t.name, t.tensor_type, t.data.tobytes()) for t in ours.tensors] == [
        (t.name, t.tensor_type, t.data.tobytes()) for t in package.tensors]
