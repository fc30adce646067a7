"""The peer benchmark's result as text: per length and workload, each side's median wall seconds with its
min–max spread over the rounds, median CPU seconds, median peak memory of the call, and the ratios the
targets are judged on; above them the machine, its load and the threads, and which TransformerLens
model class ran with which settings, so a figure never travels without them.

Ratios: ``speed-up`` is the peer's median wall seconds over txviz's (above 1: txviz is faster);
``memory`` is txviz's median peak over the peer's (below 1: txviz holds less); for the summaries,
``trace / plain`` is the trace's median over the plain forward's, both txviz, in the same rounds.
"""

from __future__ import annotations

import statistics

TARGETS = {"maps": {"speedup": 1.5, "memory": 0.6}, "everything": {"speedup": 1.5, "memory": 0.6},
           "summaries": {"over_plain": 1.1}}
WORK = {"maps": "every attention map", "everything": "everything (maps, q/k/v, rotated q/k, sublayer outputs, "
        "residuals, logits)", "summaries": "summaries (txviz default trace) beside a plain forward"}


def side_summary(runs: list[dict]) -> dict:
    wall = [r["wall_s"] for r in runs]
    return {"median_s": round(statistics.median(wall), 4), "min_s": round(min(wall), 4), "max_s": round(max(wall), 4),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 4),
            "peak_mb": round(statistics.median(r["peak_rss_mb"] for r in runs), 1), "n": len(runs)}


def row_ratios(row: dict) -> dict:
    """The ratios of one row (None where a side was skipped)."""
    sides = {side: side_summary(runs) for side, runs in row["runs"].items() if runs}
    ours = sides.get("txviz")
    if row["workload"] == "summaries":
        plain = sides.get("plain")
        return {"over_plain": _ratio(ours and ours["median_s"], plain and plain["median_s"])}
    peer = next((s for name, s in sides.items() if name != "txviz"), None)
    return {"speedup": _ratio(peer and peer["median_s"], ours and ours["median_s"]),
            "cpu_speedup": _ratio(peer and peer["cpu_s"], ours and ours["cpu_s"]),
            "memory": _ratio(ours and ours["peak_mb"], peer and peer["peak_mb"])}


def summaries_missed(row: dict) -> bool:
    """A summaries row whose trace / plain ratio was measured and is over its target."""
    if row["workload"] != "summaries":
        return False
    ratio = row_ratios(row)["over_plain"]
    return ratio is not None and ratio > TARGETS["summaries"]["over_plain"]


def bound(row: dict) -> str | None:
    """For a summaries row that missed, what bounds it: the layer's parts, against the CPU seconds of the
    plain forward and the trace of the same rounds (txviz.bench.attention.describe)."""
    parts = row.get("attention_parts")
    if parts is None:
        return None
    from txviz.bench.attention import describe

    cpu = {side: side_summary(runs)["cpu_s"] for side, runs in row["runs"].items() if runs}
    return describe(parts, cpu.get("plain"), cpu.get("txviz"))


def _ratio(top, bottom) -> float | None:
    return None if top is None or not bottom else round(top / bottom, 3)


def verdicts(row: dict) -> list[str]:
    """Each target of the row's workload: its measured ratio, met or MISSED (or not measured)."""
    ratios, lines = row_ratios(row), []
    for name, target in TARGETS[row["workload"]].items():
        value = ratios[name]
        wanted = f"≥ {target}×" if name == "speedup" else f"≤ {target}×"
        label = {"speedup": "speed-up", "memory": "memory", "over_plain": "trace / plain"}[name]
        if value is None:
            lines.append(f"{label} {wanted}: not measured (a side was skipped)")
            continue
        met = value >= target if name == "speedup" else value <= target
        cpu = f" (CPU seconds: {ratios['cpu_speedup']:.2f}×)" if name == "speedup" and ratios.get("cpu_speedup") else ""
        lines.append(f"{label} {value:.2f}× (target {wanted}) {'met' if met else 'MISSED'}{cpu}")
    return lines


def markdown(result: dict) -> str:
    machine = result["machine"]
    threads = machine["threads"] or _threads(result) or "torch default"
    lines = [f"Peer benchmark: txviz against {result['peer']} on {machine['cpu']} ({machine['cpus']} CPUs), "
             f"{threads} threads, load average {_load(machine['load_average_start'])} at the start and "
             f"{_load(machine['load_average_end'])} at the end, {machine['available_gb']} GiB available.",
             f"Each figure: {result['repeats']} fresh processes per side, the sides alternating; median wall "
             "seconds (min–max), median CPU seconds, median peak resident memory of the call (weights "
             f"included). txviz keeps maps as {_storage(result['maps'])}; TransformerLens as fp32 (T, T).",
             f"TransformerLens{_lens_version(result)}: {result.get('peer_settings', 'TransformerBridge')}; "
             "run_with_cache under torch.inference_mode.",
             "", "| tokens | work | side | wall s (min–max) | CPU s | peak MB | ratios |",
             "|---:|---|---|---:|---:|---:|---|"]
    for row in result["rows"]:
        for side, runs in row["runs"].items():
            if not runs:
                continue
            s = side_summary(runs)
            lines.append(f"| {row['tokens']} | {row['workload']} | {side} | {s['median_s']:.2f} "
                         f"({s['min_s']:.2f}–{s['max_s']:.2f}) | {s['cpu_s']:.2f} | {s['peak_mb']:.0f} | |")
        for side, why in row["skipped"].items():
            lines.append(f"| {row['tokens']} | {row['workload']} | {side} | skipped: {why} | | | |")
        for side, why in row.get("failed", {}).items():
            lines.append(f"| {row['tokens']} | {row['workload']} | {side} | {why} | | | |")
        lines.append(f"| {row['tokens']} | {row['workload']} | **ratios** | | | | {'; '.join(verdicts(row))} |")
    bounds = [f"- {row['tokens']} tokens, what bounds the summaries' miss: {text}"
              for row in result["rows"] if (text := bound(row))]
    lines += ["", *bounds] if bounds else []
    lines += ["", "Workloads: " + "; ".join(f"{name}: {text}" for name, text in WORK.items()) + ".",
              "speed-up = TransformerLens median wall s / txviz's; memory = txviz median peak / TransformerLens'; "
              "trace / plain = txviz default trace / plain forward, same rounds."]
    return "\n".join(lines)


def _lens_version(result: dict) -> str:
    for row in result["rows"]:
        for run in row["runs"].get("transformer-lens", []):
            return f" {run['version']}" if run.get("version") else ""
    return ""


def _storage(name: str) -> str:
    return "fp16, lower triangle packed" if name == "fp16-packed" else "fp32 (T, T)"


def _load(values) -> str:
    return "unknown" if not values else " / ".join(f"{v:.2f}" for v in values)


def _threads(result: dict) -> int | None:
    for row in result["rows"]:
        for runs in row["runs"].values():
            if runs:
                return runs[0].get("threads")
    return None
