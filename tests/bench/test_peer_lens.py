"""TransformerLens' side of the peer benchmark computes the same maps as txviz: every pattern within 1e-4 of
txviz's fp32 map and the logits alike (up to the constant a centred unembedding adds to each row), from a
tiny llama checkpoint, offline. Runs only where TransformerLens is importable (the bench extra; in this
repository's own environment it is not, and the test is skipped); each model class its version has."""

from __future__ import annotations

import importlib

import pytest
import torch

from tests.helpers.tiny_hf import save_llama_with_tokenizer
from txviz.bench import peer_lens
from txviz.capture.maps import MapStorage
from txviz.capture.trace import trace
from txviz.loading import load

pytest.importorskip("transformer_lens")


def _has(api: str) -> bool:
    module, name = peer_lens.PROBES[api].removeprefix("from ").split(" import ")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.parametrize("api", peer_lens.APIS)
def test_transformer_lens_patterns_and_logits_equal_txvizs_maps(api, tmp_path, monkeypatch):
    if not _has(api):
        pytest.skip(f"this TransformerLens has no {api} model class")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    folder = save_llama_with_tokenizer(tmp_path / "llama")
    lens = peer_lens.load(str(folder), api)
    assert peer_lens.os.environ["HF_HUB_OFFLINE"] == "1"
    ours = load(str(folder), device="cpu", dtype=torch.float32).model
    ids = torch.randint(3, 200, (1, 40), generator=torch.Generator().manual_seed(0))
    logits, cache = peer_lens.run_with_cache(lens, ids, "maps")
    with torch.inference_mode():
        traced = trace(ours, ids, ("attn_probs", "logits"), maps=MapStorage())
    maps = traced["attn_probs"]
    patterns = sorted((name for name in cache.keys() if name.endswith("hook_pattern")),
                      key=lambda name: int(name.split(".")[1]))
    assert len(patterns) == maps.shape[0]
    for layer, name in enumerate(patterns):
        torch.testing.assert_close(cache[name][0], maps[layer, 0], atol=1e-4, rtol=0)
    centred = lambda x: x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(centred(logits[0]), centred(traced["logits"][0]), atol=1e-4, rtol=0)
