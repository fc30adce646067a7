"""The benchmark's result as the Markdown written into assets/BENCHMARKS.md: the main table, CPU seconds and
fastest repeats per method, page faults and ratio spreads, decoding, what was skipped and the targets."""

from __future__ import annotations

from txviz.bench.targets import BESIDE_HF, judge, ratios


def markdown(result: dict) -> str:
    """The results as the Markdown table written into assets/BENCHMARKS.md."""
    lines = _main_table(result["results"])
    for title, key in (("CPU seconds (user + sys, medians) of the same runs: less inflated than wall time by "
                        "other processes on a shared machine.", "cpu_s"),
                       ("Fastest repeat (wall seconds): the least disturbed run of each method.", "best_s")):
        lines += ["", title, "", *_per_method_table(result["results"], key)]
    lines += ["", *_pollution_table(result["results"])]
    decode = result["decode"]
    lines += ["", f"Decoding {decode['new_tokens']} tokens after a {decode['prompt_tokens']}-token prompt (greedy, "
              f"KV cache): txviz {decode['txviz_tok_s']} tok/s, transformers {_cell(decode['hf_tok_s'], '{}')} tok/s; "
              f"same tokens: {decode['same_tokens']}."]
    skipped = [f"{row['tokens']} tokens, {m}: {why}" for row in result["results"] for m, why in row["skipped"].items()]
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped) + "."]
    targets = judge(result)
    if targets:
        lines += ["", "Targets, on the CPU-second ratios"
                  + (" (not judged under --quick):" if result.get("quick") else ":"), "",
                  *(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in targets)]
    return "\n".join(lines)


def _cell(value, fmt="{:.3f}") -> str:
    return "—" if value is None else fmt.format(value)


def _main_table(rows: list[dict]) -> list[str]:
    lines = ["| tokens | plain forward (s) | txviz trace (s) | HF eager + attentions (s) | trace / plain | "
             "HF / trace | trace peak RSS (MB) | plain peak RSS (MB) | HF peak RSS (MB) | rebuild one map (ms) | "
             "rebuild 256 rows (ms) | rounds |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['tokens']} | {_cell(row['plain_forward_s'])} | {_cell(row['trace_s'])} | "
                     f"{_cell(row['hf_eager_attn_s'])} | {_cell(row['trace_over_plain'], '{:.2f}×')} | "
                     f"{_cell(row['hf_over_trace'], '{:.2f}×')} | {_cell(row['peak_rss_mb'], '{:.0f}')} | "
                     f"{_cell(row['plain_peak_rss_mb'], '{:.0f}')} | {_cell(row['hf_peak_rss_mb'], '{:.0f}')} | "
                     f"{_cell(_ms(row.get('rebuild_map_s')), '{:.1f}')} | {_cell(_ms(row.get('rebuild_rows_s')), '{:.1f}')} | "
                     f"{_cell(row.get('rounds'), '{}')} |")
    return lines


def _per_method_table(rows: list[dict], key: str) -> list[str]:
    """One figure per method (``key``: cpu_s or best_s) and the ratios ``targets.ratios`` takes."""
    lines = ["| tokens | plain forward | txviz trace | plain beside HF | HF eager + attentions | trace / plain | "
             "HF / plain | HF / trace |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        values = row.get(key, {})
        quotients = ratios(values)
        lines.append(f"| {row['tokens']} | {_cell(values.get('plain'))} | {_cell(values.get('trace'))} | "
                     f"{_cell(values.get(BESIDE_HF))} | {_cell(values.get('hf'))} | "
                     + " | ".join(_cell(quotients[name], '{:.2f}×')
                                  for name in ("trace_over_plain", "hf_over_plain", "hf_over_trace")) + " |")
    return lines


def _pollution_table(rows: list[dict]) -> list[str]:
    lines = ["Trace and plain forward are timed side by side in one worker, transformers and a plain forward in "
             "another (no transformers model beside the trace); HF / trace = (HF / plain) ÷ (trace / plain). "
             "Minor page faults per call (medians), and the spread of the per-round CPU ratios to the plain "
             "forward (interquartile range / median):", "",
             "| tokens | plain | trace | plain beside HF | HF | trace spread | HF spread | rounds (trace, HF) |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        faults, spread = row.get("minflt", {}), row.get("ratio_spread", {})
        counts = " | ".join(_cell(faults.get(m), "{}") for m in ("plain", "trace", BESIDE_HF, "hf"))
        lines.append(f"| {row['tokens']} | {counts}"
                     + f" | {_cell(spread.get('trace'), '{:.3f}')} | {_cell(spread.get('hf'), '{:.3f}')} | "
                     f"{row.get('rounds')}, {_cell(row.get('hf_rounds'), '{}')} |")
    return lines


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
