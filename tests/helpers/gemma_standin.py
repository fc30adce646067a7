"""Tiny stand-ins of the two known real models under their cache file names, so app tests take the
sidebar's real path in seconds: SmolLM2's shape in little (30 layers, 9 heads, 3 KV heads) and Gemma 3
270M's (18 layers, 5 sliding layers with θ 10 000 to 1 global with θ 1 000 000, MQA 4q/1kv, QK-norm)."""

from __future__ import annotations

import pytest

from pathlib import Path

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from tests.helpers.tiny_gguf_gemma import spm_vocab, write_gemma_gguf
from txviz import ModelConfig
from txviz.loading.sources import KNOWN_MODELS

GEMMA_LIKE = ModelConfig(vocab_size=len(spm_vocab()[0]), d_model=64, n_layers=18, n_heads=4, n_kv_heads=1,
                         head_dim=32, ffn_hidden=96, max_seq_len=2048, norm_eps=2.0 ** -20, ffn="geglu",
                         gelu_approximate="tanh", embed_scale=8.0, tie_embeddings=True, rope_theta=1e6,
                         sliding_window=8, rope_local_theta=10000.0, layer_types=(("sliding",) * 5 + ("full",)) * 3,
                         qk_norm=True, sandwich_norm=True, name="tiny-gemma3")


def write_stand_ins(home: Path, *, smollm2: bool = True, gemma: bool = True) -> None:
    if smollm2:
        config = tiny(n_layers=30, n_heads=9, n_kv_heads=3, d_model=72, max_seq_len=2048, name="tiny-smollm2")
        write_gguf(home / KNOWN_MODELS["smollm2-135m"].filename, config, weights_of(config))
    if gemma:
        write_gemma_gguf(home / KNOWN_MODELS["gemma3-270m"].filename, "gemma3", GEMMA_LIKE, weights_of(GEMMA_LIKE))


def _stand_in_home(tmp_path, monkeypatch, **which):
    """TXVIZ_HOME holding the stand-ins ``which`` asks for under their real file names, fetching again
    failing, and Streamlit's resource cache empty before and after (the models are loaded by name)."""
    from txviz.loading import fetch

    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("a cached model was fetched again"))
    write_stand_ins(tmp_path, **which)
    import streamlit as st
    st.cache_resource.clear()
    yield tmp_path
    st.cache_resource.clear()


@pytest.fixture
def gemma_home(tmp_path, monkeypatch):
    """A TXVIZ_HOME holding only the Gemma 3 stand-in under its real file name; fetching again fails."""
    yield from _stand_in_home(tmp_path, monkeypatch, smollm2=False)


@pytest.fixture
def smollm2_home(tmp_path, monkeypatch):
    """A TXVIZ_HOME holding only the SmolLM2 stand-in under its real file name; fetching again fails."""
    yield from _stand_in_home(tmp_path, monkeypatch, gemma=False)
