"""The real Gemma 3 270M GGUF against references loading the same file: the tokenizer against SentencePiece
(Gemma's own tokenizer library) on a varied text set; the config, and logits and every attention map
(18 layers x 4 heads) on a prompt longer than the sliding window, so the window is in force on the local
layers, against transformers.

The module runs 🤗 transformers (``NEEDS_TRANSFORMERS``): its tests stay on the one worker that runs
transformers (tests/conftest.py), so Gemma is loaded once per session by each side (~60 CPU s), not once per
worker, and no worker imports transformers while collecting it.

Runs on ``TXVIZ_GEMMA3_GGUF`` (a path to gemma-3-270m-q4_k_m.gguf) when set, else on the session's own
fetch (conftest's ``gemma3_gguf_path``, under its rules). It used to take only a copy some other test had
already fetched and skip otherwise, so whether it ran depended on the order the workers took the tests
in (a run of this file alone skipped every test). transformers needs ``accelerate`` to load a GGUF.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

import pytest
import torch

from tests.helpers.hf_reference import NEEDS_TRANSFORMERS, gguf_read_once
from tests.helpers.spm_reference import SentencePieceReference
from txviz import Decoder
from txviz.capture.trace import trace
from txviz.loading.gguf.float32_copy import load_gguf_cached

pytestmark = [pytest.mark.e2e, *NEEDS_TRANSFORMERS,
              pytest.mark.skipif(find_spec("accelerate") is None, reason="accelerate is not installed")]

GEMMA3_ENV = "TXVIZ_GEMMA3_GGUF"
GEMMA3_LOAD_LOCK = ".test-gemma3-load.lock"  # held by tests/app/test_gemma3_pages.py's load too
WINDOW = 512
TEXTS = ["Hello world", " leading space", "  two leading", "trailing  ", "x  5", "12345 + 678 = 13023", "3.14159",
         "line one\nline two\n\n\nthree", "tabs\there\t\tand", "mixed \t \n  whitespace   runs    end",
         "naïve café résumé", "emoji 😀👍🏽 family 👨‍👩‍👧", "日本語のテキストです。", "Привет, мир!", "مرحبا بالعالم",
         "हिन्दी पाठ", "def f(x):\n    return x ** 2  # square\n", '<div class="a">hi</div>',
         "<start_of_turn>user\nhi<end_of_turn>", "a<bos>b", "\u00a0nbsp and zero\u200bwidth", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math",
         "\x04 control \x1d", "", " ", "\n", "The trophy didn't fit in the suitcase because it was too big.",
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ＡＢＣ full width", "🦙🦙🦙 rare emoji 𓀀",
         "URL https://example.com/path?q=1&r=2", "snake_case_name camelCaseName", "$100,000.00 and 1e-5"]
STORY = ("Once upon a time, in a small village at the edge of a great forest, there lived an old woodcutter and "
         "his daughter. Every morning he walked into the forest with his axe, and every evening he came home. ")


@pytest.fixture(scope="module", autouse=True)
def one_metadata_read_per_file():
    """transformers' GGUF loading (config, weights) and the SentencePiece reference read the file's
    262k-entry vocabulary once between them, not three times (tests/helpers/hf_reference.py)."""
    with gguf_read_once():
        yield


@pytest.fixture(scope="module")
def gguf_path(request) -> Path:
    if os.environ.get(GEMMA3_ENV):
        return Path(os.environ[GEMMA3_ENV]).expanduser()
    return request.getfixturevalue("gemma3_gguf_path")  # the session's fetch, once, under its lock


@pytest.fixture(scope="module")
def loaded(gguf_path):
    """Through the float32 copy the app keeps beside the GGUF (``load_gguf_cached``: the same dequantized
    weights, sha256-checked): whichever of this module and tests/app/test_gemma3_pages.py loads Gemma
    first dequantizes it (~15 s), the other waits on the same lock and reads the copy (~3 s)."""
    from filelock import FileLock

    from txviz.loading.home import txviz_home

    with FileLock(str(txviz_home() / GEMMA3_LOAD_LOCK)):
        return load_gguf_cached(gguf_path, device="cpu", dtype=torch.float32)


@pytest.fixture(scope="module")
def hf_model(gguf_path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                attn_implementation="eager", dtype=torch.float32).eval()


def test_tokenizer_equals_sentencepiece(gguf_path, loaded):
    """Gemma's tokenizer is a SentencePiece model: Google's library, run on the file's own pieces, is the
    reference (tests/helpers/spm_reference.py; transformers' GGUF port of it cost ~30 CPU s more here)."""
    import gguf

    reference = SentencePieceReference(gguf.GGUFReader(str(gguf_path)).fields)  # the reader hf_model reuses
    ours = loaded.tokenizer
    assert ours.vocab_size == reference.vocab_size == 262144 and ours.adds_bos  # the file says: add BOS
    for text in TEXTS + [" " * 40]:
        ids = list(ours.encode(text).ids)
        assert ids == reference.encode(text), text
        assert ours.decode(ids) == text, text
    # 40 spaces: longer than the longest run piece (31), split longest first as SentencePiece and llama.cpp
    # do; transformers' merges give 16 + 24 here (its one difference from the reference we found)
    assert [len(ours.decode([i])) for i in ours.encode(" " * 40).ids] == [31, 9]


def test_config_matches_transformers(loaded, hf_model):
    config, hf = loaded.config, hf_model.config
    assert (config.n_layers, config.n_heads, config.n_kv_heads, config.head_dim) == (18, 4, 1, 256)
    assert config.layer_windows == tuple(WINDOW if kind == "sliding_attention" else None for kind in hf.layer_types)
    rope = hf.rope_parameters
    assert (config.rope_local_theta, config.rope_theta) == (rope["sliding_attention"]["rope_theta"],
                                                            rope["full_attention"]["rope_theta"])
    assert config.query_scale is None and hf.query_pre_attn_scalar == config.head_dim  # both: head_dim ** -0.5


def story_ids(loaded, n_tokens: int) -> torch.Tensor:
    tokenizer = loaded.tokenizer
    ids = [tokenizer.bos_id] + list(tokenizer.encode(STORY * (n_tokens // 30 + 1)).ids)
    return torch.tensor([ids[:n_tokens]])


def test_logits_and_every_attention_map_match_transformers_past_the_window(loaded, hf_model):
    ids = story_ids(loaded, WINDOW + 48)
    tr = trace(loaded.model, ids, capture=["logits", "attn_probs"])
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True)
    expected_maps = torch.stack(out.attentions)  # (L, B, H, T, S)
    assert tr["attn_probs"].shape == expected_maps.shape == (18, 1, 4, WINDOW + 48, WINDOW + 48)
    assert tr["logits"].shape == out.logits.shape
    assert (tr["logits"].dtype, tr["attn_probs"].dtype) == (out.logits.dtype, expected_maps.dtype) == (
        torch.float32, torch.float32)
    # assert_close(rtol=0, atol) is |Δ| <= atol everywhere: the largest |Δ| against atol, computed once
    # (assert_close's own pass over 560 x 262144 logits cost ~3 CPU s more); a NaN fails as it would there
    logits_gap = (tr["logits"] - out.logits).abs().max().item()
    maps_gap = (tr["attn_probs"] - expected_maps).abs().max().item()
    print(f"max |Δ| logits {logits_gap:.3g}, maps {maps_gap:.3g}")
    assert maps_gap <= 1e-5 and logits_gap <= 1e-4, (maps_gap, logits_gap)
    beyond = tr["attn_probs"][:, 0, :, -1, : ids.shape[1] - WINDOW].sum(dim=(-1, -2))  # last query, keys out of reach
    for layer, window in enumerate(loaded.config.layer_windows):
        assert (beyond[layer] == 0) if window else (beyond[layer] > 0), layer


def test_norm_weights_are_stored_as_one_plus_w(loaded):
    """llama.cpp writes Gemma's norms as 1 + w: used as they are the model predicts its text; adding the 1
    again (as if the file held w) ruins it."""
    ids = story_ids(loaded, 64)

    def loss(model: Decoder) -> float:
        with torch.no_grad():
            logits = model(ids)
        return torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).item()

    state = loaded.model.state_dict()
    plus_one = {k: v + 1 if k.endswith("norm.weight") else v for k, v in state.items()}
    stored, again = loss(loaded.model), loss(Decoder.from_state_dict(loaded.config, plus_one))
    assert again > stored + 5, (stored, again)
