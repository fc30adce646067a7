"""How fast the interventions are: exact patching of every head (batched, per chunk size) and the
attribution pass, against one plain forward and one forward + backward of the same prompt.

    python -m txviz.causal.bench            # SmolLM2-135M on the trophy pair (24 tokens with the sink)
    python -m txviz.causal.bench --threads 2 --repeats 5

Medians over ``repeats`` in this process; the model is loaded once. The target: every head of
SmolLM2 (30 layers × 9 = 270) patched exactly in batched calls, and the attribution pass at about the
cost of one forward and one backward (Nanda 2023).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable, Sequence

import torch

from txviz.causal.activations import GradientProbe
from txviz.causal.attribution import attribution_patching
from txviz.causal.metric import logit_diff
from txviz.causal.patching import patch_heads

TROPHY = ("The trophy didn't fit in the suitcase because it was too big. The thing that was too big was the",
          "The trophy didn't fit in the suitcase because it was too small. The thing that was too small was the",
          " trophy", " suitcase")
CHUNK_SIZES = (1, 16, 64, 270)


def _median_seconds(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4)


def _forward_backward(model, ids: torch.Tensor, answer_id: int, wrong_id: int) -> None:
    """One forward and one backward to the activations (the residual entering each layer), no weight
    gradients: the yardstick the attribution pass (two forwards, one backward) is held to."""
    probe = GradientProbe(("resid_pre",))
    with torch.enable_grad():
        metric = logit_diff(model(ids[None], record=probe, last_only=True), answer_id, wrong_id).sum()
        torch.autograd.grad(metric, list(probe.probes.values()))


def patching_benchmark(model, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, answer_id: int, wrong_id: int,
                       *, chunk_sizes: Sequence[int] = CHUNK_SIZES, repeats: int = 3) -> dict:
    """Seconds (medians) of: one forward, one forward + backward, the attribution pass, and exact
    patching of every head's output per chunk size (heads per batched forward call)."""
    config = model.config
    n_heads = config.n_layers * config.n_heads
    seconds = {
        "forward": _median_seconds(lambda: model(clean_ids[None], last_only=True), repeats),
        "forward_backward": _median_seconds(lambda: _forward_backward(model, clean_ids, answer_id, wrong_id), repeats),
        "attribution": _median_seconds(
            lambda: attribution_patching(model, clean_ids, corrupt_ids, answer_id, wrong_id), repeats),
    }
    exact = {str(size): _median_seconds(lambda: patch_heads(model, clean_ids, corrupt_ids, answer_id, wrong_id,
                                                             chunk_size=size), repeats)
             for size in chunk_sizes if size <= n_heads or size == chunk_sizes[0]}
    return {"n_tokens": int(clean_ids.shape[-1]), "n_heads": n_heads, "threads": torch.get_num_threads(),
            "seconds": seconds, "exact_patching_seconds_by_chunk": exact}


def trophy_benchmark(loaded, *, repeats: int = 3, chunk_sizes: Sequence[int] = CHUNK_SIZES) -> dict:
    """``patching_benchmark`` on the trophy pair, tokenized with the sink as ``txviz patch`` does."""
    clean, corrupt, answer, wrong = TROPHY
    tokenizer = loaded.tokenizer
    clean_ids = torch.tensor(list(tokenizer.encode(clean, bos="sink").ids))
    corrupt_ids = torch.tensor(list(tokenizer.encode(corrupt, bos="sink").ids))
    answer_id, wrong_id = tokenizer.encode(answer, bos="none").ids[0], tokenizer.encode(wrong, bos="none").ids[0]
    with torch.no_grad():
        model_result = patching_benchmark(loaded.model, clean_ids, corrupt_ids, answer_id, wrong_id,
                                          repeats=repeats, chunk_sizes=chunk_sizes)
    return {"model": loaded.source, "device": str(loaded.device), **model_result}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from txviz.loading import load

    parser = argparse.ArgumentParser(prog="python -m txviz.causal.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a shared machine more threads wait on each other "
                             "at OpenMP barriers and the figures measure the load, not the code)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; medians are reported")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        parser.error("--threads and --repeats must be at least 1")
    torch.set_num_threads(args.threads)
    print(json.dumps(trophy_benchmark(load(None, device="cpu"), repeats=args.repeats), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
