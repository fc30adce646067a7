"""``txviz bench --models A B …``: the same benchmark (txviz.bench.runner.run) on several models in one run,
one after another with the same lengths, repeats and threads, and one table putting them side by side
(trace and plain-forward time, their peak RSS) with the load average before and after each model, so
the figures can be read against what else the machine was doing."""

from __future__ import annotations

from typing import Callable

from txviz.bench.runner import load_average


def run_models(sources: dict[str, str | None], tokens, *, run: Callable[..., dict], **options) -> dict:
    """``sources``: display name → what ``run(model=…)`` takes (None: the default model). Each model's
    full result, plus the load average around it."""
    results = []
    for name, source in sources.items():
        before = load_average()
        result = run(tokens, model=source, **options)
        results.append({"name": name, "load_average_before": before, "load_average_after": load_average(),
                        **result})
    return {"models": results}


def markdown_models(result: dict) -> str:
    """One row per model and length: times (median wall s, CPU s) and peak RSS of trace and plain forward."""
    def cell(value, fmt="{:.3f}"):
        return "—" if value is None else fmt.format(value)

    lines = ["| model | tokens | plain forward (s) | txviz trace (s) | plain CPU (s) | trace CPU (s) | trace / plain | "
             "trace peak RSS (MB) | plain peak RSS (MB) | decode tok/s | load average (1/5/15 min, before → after) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for model in result["models"]:
        load = " → ".join("/".join(f"{x:.1f}" for x in avg) if avg else "?"
                          for avg in (model["load_average_before"], model["load_average_after"]))
        for row in model["results"]:
            lines.append(f"| {model['name']} | {row['tokens']} | {cell(row['plain_forward_s'])} | "
                         f"{cell(row['trace_s'])} | {cell(row.get('cpu_s', {}).get('plain'))} | "
                         f"{cell(row.get('cpu_s', {}).get('trace'))} | "
                         f"{cell(row['trace_over_plain'], '{:.2f}×')} | {cell(row['peak_rss_mb'], '{:.0f}')} | "
                         f"{cell(row['plain_peak_rss_mb'], '{:.0f}')} | {model['decode']['txviz_tok_s']} | {load} |")
    return "\n".join(lines)
