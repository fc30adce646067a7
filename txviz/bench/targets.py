"""The model-side speed targets (a full trace near a plain forward's cost, well under transformers'),
judged on a ``txviz bench`` result: met, or missed with what bounds the miss (txviz.bench.attention's
breakdown of one layer at that length).

Ratios are taken on CPU seconds (user + sys, medians of the repeats, two methods interleaved in one
process): on a shared machine they move far less than wall time. trace / plain comes from the worker
timing those two; transformers / plain from the worker timing transformers beside its own plain forward
(``plain_beside_hf``); transformers / trace is their quotient (txviz.bench.runner's docstring says why).
"""

from __future__ import annotations

TRACE_OVER_PLAIN_MAX = 1.1  # the full trace at most 1.1× a plain forward, at every length
HF_OVER_TRACE_MIN = 2.0  # and at least 2× faster than transformers eager + output_attentions ...
HF_TOKENS = 1024  # ... at this length


NOT_JUDGED = "not judged: the targets are for real models, and --quick runs a tiny random one"
BESIDE_HF = "plain_beside_hf"  # txviz.bench.runner's key for the plain forward timed beside transformers


def ratios(values: dict) -> dict[str, float | None]:
    """From one row's per-method figures (seconds, CPU seconds, ...): trace_over_plain, hf_over_plain
    (over the plain forward of transformers' own worker where there is one) and hf_over_trace, their
    quotient."""
    plain, traced, hf = values.get("plain"), values.get("trace"), values.get("hf")
    beside = values.get(BESIDE_HF) or plain  # results from before the two workers: one plain for both

    def over(top, bottom):
        return top / bottom if top and bottom else None

    trace_over_plain, hf_over_plain = over(traced, plain), over(hf, beside)
    return {"trace_over_plain": trace_over_plain, "hf_over_plain": hf_over_plain,
            "hf_over_trace": over(hf_over_plain, trace_over_plain)}


def cpu_ratio(row: dict, numerator: str, denominator: str) -> float | None:
    """``numerator`` / ``denominator`` in CPU seconds, as ``ratios`` takes them."""
    return ratios(row.get("cpu_s", {}))[f"{numerator}_over_{denominator}"]


def trace_misses(row: dict) -> bool:
    ratio = cpu_ratio(row, "trace", "plain")
    return ratio is not None and ratio > TRACE_OVER_PLAIN_MAX


def judge(result: dict) -> list[str]:
    """One line per target and length measured: the ratio, met or MISSED (``NOT_JUDGED`` on a --quick
    result), and for a missed or unjudged trace ratio the layer breakdown measured in the same run."""
    lines, applies = [], not result.get("quick")
    for row in result["results"]:
        ratio = cpu_ratio(row, "trace", "plain")
        if ratio is None:
            continue
        verdict = ("met" if ratio <= TRACE_OVER_PLAIN_MAX else "MISSED") if applies else NOT_JUDGED
        lines.append(f"trace / plain forward at {row['tokens']} tokens: {ratio:.2f}× (target ≤ {TRACE_OVER_PLAIN_MAX}×) "
                     f"{verdict}")
        if verdict != "met" and row.get("attention_parts"):
            from txviz.bench.attention import describe
            cpu = row.get("cpu_s", {})
            lines.append(f"  what bounds it: {describe(row['attention_parts'], cpu.get('plain'), cpu.get('trace'))}")
        if row["tokens"] == HF_TOKENS:
            hf = cpu_ratio(row, "hf", "trace")
            if hf is not None:
                said = ('met' if hf >= HF_OVER_TRACE_MIN else 'MISSED') if applies else NOT_JUDGED
                lines.append(f"transformers eager + attentions / trace at {HF_TOKENS} tokens: {hf:.2f}× "
                             f"(target ≥ {HF_OVER_TRACE_MIN}×) {said}")
                if said == "MISSED":
                    lines.append(f"  what bounds it: transformers costs {cpu_ratio(row, 'hf', 'plain'):.2f}× our plain "
                                 f"forward here, so {HF_OVER_TRACE_MIN}× faster than it needs a trace at "
                                 f"{cpu_ratio(row, 'hf', 'plain') / HF_OVER_TRACE_MIN:.2f}× the plain forward")
    return lines
