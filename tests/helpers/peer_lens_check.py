"""Run where TransformerLens is installed (the bench extra), not in the test suite, which does not install it:
``<python with transformer-lens> -m tests.helpers.peer_lens_check`` from the repository root (``PYTHONPATH=.``
if that interpreter does not have txviz installed). TransformerLens' side of the peer benchmark computes the same
maps as txviz: every pattern within 1e-4 of txviz's fp32 map and the logits alike (up to the constant a centred
unembedding adds to each row), from a tiny llama checkpoint, offline; for each model class its version has.
Prints each class's largest differences and exits 1 if any is past 1e-4."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path

import torch

from tests.helpers.tiny_hf import save_llama_with_tokenizer
from txviz.bench import peer_lens
from txviz.capture.maps import MapStorage
from txviz.capture.trace import trace
from txviz.loading import load

TOLERANCE = 1e-4


def _has(api: str) -> bool:
    module, name = peer_lens.PROBES[api].removeprefix("from ").split(" import ")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def differences(api: str, folder: Path) -> tuple[float, float]:
    """The largest |pattern − txviz map| over every layer and head, and of the row-centred logits."""
    os.environ.pop("HF_HUB_OFFLINE", None)
    lens = peer_lens.load(str(folder), api)
    assert os.environ["HF_HUB_OFFLINE"] == "1", "the peer's loader must keep the Hub offline"
    ours = load(str(folder), device="cpu", dtype=torch.float32).model
    ids = torch.randint(3, 200, (1, 40), generator=torch.Generator().manual_seed(0))
    logits, cache = peer_lens.run_with_cache(lens, ids, "maps")
    with torch.inference_mode():
        traced = trace(ours, ids, ("attn_probs", "logits"), maps=MapStorage())
    maps = traced["attn_probs"]
    patterns = sorted((name for name in cache.keys() if name.endswith("hook_pattern")),
                      key=lambda name: int(name.split(".")[1]))
    assert len(patterns) == maps.shape[0], (len(patterns), maps.shape)
    pattern_diff = max(float((cache[name][0] - maps[layer, 0]).abs().max()) for layer, name in enumerate(patterns))
    centred = lambda x: x - x.mean(-1, keepdim=True)
    logit_diff = float((centred(logits[0]) - centred(traced["logits"][0])).abs().max())
    return pattern_diff, logit_diff


def main() -> int:
    try:
        importlib.import_module("transformer_lens")
    except ImportError:
        print(f"TransformerLens is not importable by {sys.executable}: pip install 'txviz[bench]' there")
        return 2
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_llama_with_tokenizer(Path(tmp) / "llama")
        for api in peer_lens.APIS:
            if not _has(api):
                print(f"{api}: this TransformerLens has no such model class")
                continue
            pattern_diff, logit_diff = differences(api, folder)
            ok = pattern_diff <= TOLERANCE and logit_diff <= TOLERANCE
            failed |= not ok
            print(f"{api}: patterns within {pattern_diff:.1e}, centred logits within {logit_diff:.1e} "
                  f"({'ok' if ok else f'past {TOLERANCE:g}'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
