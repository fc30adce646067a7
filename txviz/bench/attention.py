"""One attention layer timed by part, plain against traced: where a trace's extra cost goes at a prompt
length where it misses its target (``txviz bench``: a missed target says what bounds it).

On the loaded model's first full-attention layer, with that layer's own q, k, v on the benchmark's
prompt, CPU seconds of the process, every thread (the fastest of the repeats; until 2026-12-06 this read
the calling thread's alone, which with two intra-op threads left out the other thread's share of every
operation, so a part of the trace's excess that was attention's read as lying outside it):

* ``fused_s``: the plain forward's attention, torch's fused SDPA kernel;
* ``traced_s``: the traced forward's attention, the blockwise path with every head's summaries;
* ``products_s``: the same blocks' explicit QKᵀ and PV products alone, and ``softmax_s``: their
  softmax (timed with the products, less the products alone). ``summaries_s`` is the rest of
  ``traced_s``: the per-row maxima, sums and gathers of the summaries, the mask and the copies.

The fused kernel gives the output and, at most, each row's log-sum-exp; the summaries need each row's
largest weight (``max_weight``) and Σ p·s (the entropy), which no torch kernel returns, so the traced
path multiplies the scores out block by block. That is the bound this breakdown measures.

* ``lse_route_s`` times the other route, through the fused kernel's own outputs (the obvious alternative),
  for the entropy alone: torch's CPU flash kernel returns each row's log-sum-exp beside the output, and
  Σ p·s = scale·q·(PK) is a second call with the keys as the values (the kernel needs V's head size to
  equal Q's, so K cannot ride along V in one call). That is two fused calls before ``max_weight``, which
  needs every score anyway. Measured 2026-12-02 on SmolLM2's layer 5 (CPU ms, one thread, median of 5,
  load 3–6): at 1024 tokens fused 16.4, the route 34.0 (2.07×), the whole traced path with every summary
  24.9 (1.51×); at 4096 fused 237, the route 438 (1.85×), traced 386 (1.63×). ``lse_route``'s entropy
  equals the summaries' (tests/bench/test_attention_route.py), so the time is that of the right numbers.

Measured 2026-12-02 on one SmolLM2 layer, one thread, load average 5–7 (CPU ms): at 4096 tokens fused 200,
traced 382 = products 211 + softmax 102 + the rest 70; at 8192 fused 833, traced 1687 = products 745 +
softmax 497 + the rest 446. The explicit products alone cost what the whole fused kernel does (89–105%),
so products and softmax without any summary are already 1.5× the fused attention: with the plain
forwards these runs imply (about 16 s and 50 s at 4096 and 8192, from the 1.35×/1.51× measured beside
them earlier) that alone puts a trace near 1.2× and 1.25× (``describe``'s floor, from a run's own plain).
At 1024 tokens it is the other way round (layer 0, load 2–5): products 10.6 + softmax 3.9 against the
fused kernel's 16.0, so the whole excess (9.3 ms a layer, 1.49×) is the summaries, mask and copies.
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

    route = lse_route(attn, q, k, v, ctx)
    with torch.inference_mode():
        seconds = {
            **({"lse_route_s": _fastest(route, repeats)} if route is not None else {}),
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
    same row blocks, key ranges, grouping of a KV head's query heads, reused buffers and sharing out
    among worker threads), with or without the softmax."""
    from txviz.model import block_workers
    from txviz.model.attention import block_plan

    b, h, t, d = q.shape
    h_kv, g = attn.n_kv_heads, attn.n_groups
    k, v = k.contiguous(), v.contiguous()
    split, blocks, most = block_plan(ctx, q, k, v)

    def runner():
        scores_buffer, probs_buffer = torch.empty(most, dtype=q.dtype), torch.empty(most, dtype=torch.float32)

        def run(share) -> None:
            for rows, keys in share:
                n, width = rows.stop - rows.start, keys.stop - keys.start
                scores = scores_buffer[:b * h * n * width].view(b * h_kv, g * n, width)
                scores.baddbmm_(q[:, :, rows].reshape(b * h_kv, g * n, d),
                                k[:, :, keys].reshape(b * h_kv, width, d).transpose(1, 2), beta=0, alpha=attn.scale)
                weights = torch.softmax(scores, dim=-1, dtype=torch.float32,
                                        out=probs_buffer[:scores.numel()].view(scores.shape)) if softmax else scores
                torch.matmul(weights.to(q.dtype).view(b, h_kv, g * n, width), v[:, :, keys])

        return run

    block_workers.run_blocks(split, blocks, runner)


def lse_route(attn, q, k, v, ctx) -> Callable[[], tuple[torch.Tensor, torch.Tensor]] | None:
    """The entropy through the fused kernel (see ``lse_route_s`` above): a function returning the layer's
    output (B, H, T, D) and each row's entropy (B, H, T), or None where torch's CPU flash kernel cannot
    run this layer as the model does (another device, a mask beyond the causal one, soft-capped scores)."""
    kernel = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if kernel is None or q.device.type != "cpu" or not ctx.is_causal or attn.softcapped:
        return None

    def run():
        keys = k.repeat_interleave(attn.n_groups, dim=1)  # the kernel has no GQA: KV head j serves heads j·g…
        out, log_sum_exp = kernel(q, keys, v.repeat_interleave(attn.n_groups, dim=1), 0.0, True, scale=attn.scale)
        weighted_keys, _ = kernel(q, keys, keys, 0.0, True, scale=attn.scale)  # Σ_j p_ij k_j
        return out, log_sum_exp - attn.scale * (q * weighted_keys).sum(-1)  # lse − Σ p·s

    return run


def _fastest(function: Callable[[], object], repeats: int) -> float:
    """CPU seconds of the process (every thread: torch's intra-op threads and the blockwise path's workers
    work for the caller, which may spend the call waiting), the least of ``repeats`` runs after one
    warm-up. The job runs alone in a fresh process."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def describe(parts: dict, plain_s: float | None = None, trace_s: float | None = None) -> str:
    """One sentence for the report: the layer's parts and what they add up to over every layer; with the
    plain forward's CPU seconds ``plain_s``, the least trace / plain ratio the explicit products and
    softmax allow even if the summaries cost nothing; with the trace's too (``trace_s``), how much of the
    whole trace's excess attention accounts for and how much lies outside it."""
    ms = {name: _ms(parts[name] * 1000) for name in ("fused_s", "traced_s", "products_s", "softmax_s", "summaries_s")}
    extra = (parts["traced_s"] - parts["fused_s"]) * parts["n_layers"]
    floor = (parts["products_s"] + parts["softmax_s"] - parts["fused_s"]) * parts["n_layers"]
    floor_ratio = f" (a trace at ≥ {1 + floor / plain_s:.2f}× the plain forward)" if plain_s else ""
    if plain_s and trace_s and floor > trace_s - plain_s:  # a bound above the ratio measured: the parts were disturbed
        measured = f"the whole trace's {_seconds(trace_s - plain_s)} over the plain forward measured beside it" \
            if trace_s > plain_s else "the trace measured beside the plain forward, which was no slower than it"
        floor_ratio = (f", more than {measured} ({trace_s / plain_s:.2f}×): this layer's timing, in another process, "
                       f"was disturbed (a cold start or other processes) and bounds nothing here")
        trace_s = None  # nor does it say where the excess lies
    return (f"{parts['tokens']} tokens, layer {parts['layer']}'s attention alone (CPU ms, fastest of the repeats): "
            f"fused kernel {ms['fused_s']}; traced {ms['traced_s']} "
            f"({parts['traced_s'] / parts['fused_s']:.2f}×) = explicit QKᵀ and PV products {ms['products_s']} "
            f"+ softmax {ms['softmax_s']} + summaries, mask and copies {ms['summaries_s']}. "
            f"Over {parts['n_layers']} layers that is {_seconds(extra)} more than the fused kernel, "
            + (f"of which products and softmax alone, with no summary at all, are {_seconds(floor)}{floor_ratio}. "
               if floor > 0
               else f"while products and softmax alone, with no summary at all, cost {_seconds(-floor)} less than the "
                    f"fused kernel: the whole excess is the summaries, mask and copies. ")
            + _outside_attention(extra, plain_s, trace_s)
            + f"The products alone "
            f"take {parts['products_s'] / parts['fused_s']:.0%} of the fused kernel's time: no torch kernel returns "
            f"a row's largest weight or Σ p·s, so only a custom kernel fusing them into its tiles would close the gap."
            + _route_sentence(parts))


def _ms(value: float) -> str:
    """A time in ms to three significant figures at least: 0.128, 7.70, 1026.1."""
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if abs(value) >= 0.05 else f"{_ms(value * 1000)} ms"  # 0.040 ms, not 0.0 ms


def _outside_attention(in_attention: float, plain_s: float | None, trace_s: float | None) -> str:
    """Where the whole trace's excess over the plain forward lies, when both CPU times are known: at short
    prompts attention is a small part of a layer, and the recorder's own per-layer work (keeping what it
    records, one block's calls) is most of the excess."""
    if plain_s is None or trace_s is None or trace_s <= plain_s:
        return ""
    total = trace_s - plain_s
    outside = total - in_attention
    if outside <= 0:
        return f"That accounts for all of the trace's {_seconds(total)} over the plain forward. "
    return (f"Of the trace's {_seconds(total)} over the plain forward, that is {in_attention / total:.0%}; the other "
            f"{_seconds(outside)} lies outside attention, in the recorder's per-layer work (keeping what it records) "
            f"and the rounds' noise. ")


def _route_sentence(parts: dict) -> str:
    if parts.get("lse_route_s") is None:
        return ""
    route, traced = parts["lse_route_s"], parts["traced_s"]
    return (f" The fused kernel's own route to the entropy alone (its row log-sum-exp, and a second call with K as "
            f"the values for Σ p·s) takes {route * 1000:.1f} ({route / parts['fused_s']:.2f}× the fused kernel), "
            f"{'more' if route > traced else 'less'} than the whole traced path, before max_weight, which needs "
            f"every score.")
