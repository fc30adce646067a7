"""One attention layer timed by part, plain against traced: where a trace's extra cost goes at a prompt
length where it misses its target (``txviz bench``; issue 14 asks a miss to say what bounds it).

On the loaded model's first full-attention layer, with that layer's own q, k, v on the benchmark's
prompt, CPU seconds of one thread (the fastest of the repeats):

* ``fused_s``: the plain forward's attention, torch's fused SDPA kernel;
* ``traced_s``: the traced forward's attention, the blockwise path with every head's summaries;
* ``products_s``: the same blocks' explicit QKᵀ and PV products alone, and ``softmax_s``: their
  softmax (timed with the products, less the products alone). ``summaries_s`` is the rest of
  ``traced_s``: the per-row maxima, sums and gathers of the summaries, the mask and the copies.

The fused kernel gives the output and, at most, each row's log-sum-exp; the summaries need each row's
largest weight (``max_weight``) and Σ p·s (the entropy), which no torch kernel returns, so the traced
path multiplies the scores out block by block. That is the bound this breakdown measures.

Measured 2026-12-02 on one SmolLM2 layer, one thread, load average 5–7 (CPU ms): at 4096 tokens fused 200,
traced 382 = products 211 + softmax 102 + the rest 70; at 8192 fused 833, traced 1687 = products 745 +
softmax 497 + the rest 446. The explicit products alone cost what the whole fused kernel does (89–105%),
so products and softmax without any summary are already 1.5× the fused attention: with the plain
forwards these runs imply (about 16 s and 50 s at 4096 and 8192, from the 1.35×/1.51× measured beside
them earlier) that alone puts a trace near 1.2× and 1.25× (``describe``'s floor, from a run's own plain).
Not allocation: a traced layer call takes no minor page fault (the blockwise path's two buffers are made
once per layer and glibc hands back the same pages); the only fresh pages of a trace are q_rot and k_rot,
its output (90 MB at 1024 tokens: ~23 000 faults, ~40 ms of first touch, 1–2% of the call). Splitting
the summaries' four row reductions into L2-sized chunks of heads saved 15% of those passes alone but
nothing measurable in the recorder as a whole (bitwise the same values), so it was not kept.
"""

from __future__ import annotations

import time
from typing import Callable

import torch


def attention_parts(model, ids: torch.Tensor, repeats: int = 3) -> dict:
    """The breakdown above for ``ids`` (1, T) on ``model`` (a txviz Decoder), in seconds."""
    from txviz.capture.trace import Recorder, trace

    layer = _full_attention_layer(model)
    attn = model.layers[layer].attn
    captured = trace(model, ids, capture=("q_rot", "k_rot", "v"), layers=[layer])
    q, k, v = (captured.get(name, layer) for name in ("q_rot", "k_rot", "v"))
    positions = torch.arange(ids.shape[1])
    ctx = model.layer_context(layer, positions, positions, q.dtype)

    # One recorder for every repeat: the token patterns it builds on the first (warm-up) call are built
    # once per trace and shared by all its layers, so they are not this layer's cost.
    recorder = Recorder(("head_summaries",), [layer], model.config.n_layers, ids=ids).layer(layer)

    def traced():
        attn.attend(q, k, v, ctx, recorder)

    with torch.inference_mode():
        seconds = {
            "fused_s": _fastest(lambda: attn.attend(q, k, v, ctx), repeats),
            "traced_s": _fastest(traced, repeats),
            "products_s": _fastest(lambda: _blocks(attn, q, k, v, ctx, softmax=False), repeats),
            "products_softmax_s": _fastest(lambda: _blocks(attn, q, k, v, ctx, softmax=True), repeats),
        }
    products, with_softmax = seconds["products_s"], seconds.pop("products_softmax_s")
    softmax = max(0.0, with_softmax - products)
    return {"layer": layer, "tokens": ids.shape[1], **{name: round(s, 6) for name, s in seconds.items()},
            "softmax_s": round(softmax, 6), "summaries_s": round(max(0.0, seconds["traced_s"] - with_softmax), 6),
            "n_layers": model.config.n_layers}


def _full_attention_layer(model) -> int:
    """The first layer without a sliding window (every layer's, on a model without windows)."""
    for layer in range(model.config.n_layers):
        if model.kind_windows[model.kind_of[layer]] is None:
            return layer
    return 0


def _blocks(attn, q, k, v, ctx, *, softmax: bool) -> None:
    """The blockwise path's matrix products over its own blocks (txviz.model.attention._blockwise: the
    same row blocks, key ranges, grouping of a KV head's query heads and reused buffers), with or
    without the softmax."""
    b, h, t, d = q.shape
    h_kv, g = attn.n_kv_heads, attn.n_groups
    k, v = k.contiguous(), v.contiguous()
    blocks = [(rows, ctx.key_range(rows)) for rows in ctx.row_blocks(t, b * h)]
    most = max(b * h * (rows.stop - rows.start) * (keys.stop - keys.start) for rows, keys in blocks)
    scores_buffer, probs_buffer = torch.empty(most, dtype=q.dtype), torch.empty(most, dtype=torch.float32)
    for rows, keys in blocks:
        n, width = rows.stop - rows.start, keys.stop - keys.start
        scores = scores_buffer[:b * h * n * width].view(b * h_kv, g * n, width)
        scores.baddbmm_(q[:, :, rows].reshape(b * h_kv, g * n, d), k[:, :, keys].reshape(b * h_kv, width, d).transpose(1, 2),
                        beta=0, alpha=attn.scale)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs_buffer[:scores.numel()].view(scores.shape)) \
            if softmax else scores
        torch.matmul(weights.to(q.dtype).view(b, h_kv, g * n, width), v[:, :, keys])


def _fastest(function: Callable[[], object], repeats: int) -> float:
    """CPU seconds of this thread, the least of ``repeats`` runs after one warm-up."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        function()
        best = min(best, time.thread_time() - start)
    return best


def describe(parts: dict, plain_s: float | None = None) -> str:
    """One sentence for the report: the layer's parts and what they add up to over every layer; with the
    plain forward's CPU seconds ``plain_s``, the least trace / plain ratio the explicit products and
    softmax allow even if the summaries cost nothing."""
    ms = {name: parts[name] * 1000 for name in ("fused_s", "traced_s", "products_s", "softmax_s", "summaries_s")}
    extra = (parts["traced_s"] - parts["fused_s"]) * parts["n_layers"]
    floor = (parts["products_s"] + parts["softmax_s"] - parts["fused_s"]) * parts["n_layers"]
    floor_ratio = f" (a trace at ≥ {1 + floor / plain_s:.2f}× the plain forward)" if plain_s else ""
    return (f"{parts['tokens']} tokens, layer {parts['layer']}'s attention alone (CPU ms, fastest of the repeats): "
            f"fused kernel {ms['fused_s']:.1f}; traced {ms['traced_s']:.1f} "
            f"({parts['traced_s'] / parts['fused_s']:.2f}×) = explicit QKᵀ and PV products {ms['products_s']:.1f} "
            f"+ softmax {ms['softmax_s']:.1f} + summaries, mask and copies {ms['summaries_s']:.1f}. "
            f"Over {parts['n_layers']} layers that is {extra:.2f} s more than the fused kernel, of which products "
            f"and softmax alone, with no summary at all, are {floor:.2f} s{floor_ratio}. The products alone "
            f"take {parts['products_s'] / parts['fused_s']:.0%} of the fused kernel's time: no torch kernel returns "
            f"a row's largest weight or Σ p·s, so only a custom kernel fusing them into its tiles would close the gap.")
