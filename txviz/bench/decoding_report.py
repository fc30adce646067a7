"""``txviz bench --decoding``'s result as Markdown: the machine, the three ways of generating side by side
(a step's wall and CPU seconds, the first token, the run), their ratios to the plain step, the branch
against a run from scratch, and the targets a Decoding page needs (met or MISSED)."""

from __future__ import annotations

RECORD_OVER_PLAIN_MAX = 1.25  # a step with the full record at most 1.25× a plain cached decode step
FIRST_TOKEN_MAX_S = 0.5  # the first generated token within half a second, prompt prefill included
TOTAL_MAX_S = 6.0  # and 48 tokens within six seconds
BRANCH_OVER_STEPS_AFTER_MAX = 1.25  # a branch costs the steps after it, not the whole run again

LABELS = {"plain": "plain cached step (generate)", "record": "full per-step record (decode)",
          "record_lens": "record + logit lens (read after the run)"}


def _cell(value, fmt: str = "{:.4f}") -> str:
    return "—" if value is None else fmt.format(value)


def markdown(result: dict) -> str:
    run, machine = result["decoding"], result["machine"]
    load = " → ".join("/".join(f"{x:.2f}" for x in avg) if avg else "?"
                      for avg in (machine.get("load_average_before"), machine.get("load_average_after")))
    lines = [f"Decoding on {result['model']}: {run['new_tokens']} new tokens after a {run['prompt_tokens']}-token prompt, "
             f"greedy; the record keeps {run['candidates']} candidates, the sampler's view, the KV bytes and every "
             f"head's attention row on {run['attention_layers']} layers.",
             f"Machine: {machine.get('cpu') or 'unknown CPU'}, {machine.get('cpus')} cores, {run['threads']} torch "
             f"threads; load average (1/5/15 min) {load}.", "",
             "| method | step (s) | step CPU (s) | step / plain (CPU) | step / plain (wall) | first token (s) | "
             f"{run['new_tokens']} tokens (s) | runs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for method, label in LABELS.items():
        s = run["summaries"][method]
        cpu, wall = (None, None) if method == "plain" else (run[f"{method}_over_plain"], run[f"{method}_over_plain_wall"])
        lines.append(f"| {label} | {_cell(s['step_s'])} | {_cell(s['step_cpu_s'])} | {_cell(cpu, '{:.2f}×')} | "
                     f"{_cell(wall, '{:.2f}×')} | {_cell(s['first_token_s'], '{:.3f}')} | {_cell(s['total_s'], '{:.2f}')} | "
                     f"{s['runs']} |")
    b = run["branch"]
    lines += ["", f"Branch at step {b['step']} (its second candidate), reusing {b['reused_tokens']} tokens' keys and "
              f"values: {b['branch_s']:.3f} s ({b['branch_cpu_s']:.3f} CPU s) for the {b['steps_after']} steps after "
              f"it, against {b['steps_after_s']:.3f} s ({b['steps_after_cpu_s']:.3f}) for the record run's own steps "
              f"after it ({_cell(b['branch_over_steps_after_cpu'], '{:.2f}×')} in CPU seconds) and {b['scratch_s']:.3f} s "
              f"({b['scratch_cpu_s']:.3f}) generating them from scratch "
              f"({_cell(b['branch_over_scratch_cpu'], '{:.2f}×')}); same tokens as from scratch: {b['same_tokens']}. "
              f"Same tokens in all three ways: {run['same_tokens']}."]
    lines += ["", "Targets" + (" (not judged under --quick: a tiny random model):" if result.get("quick") else ":"), "",
              *(f"- {line}" for line in judge(result))]
    return "\n".join(lines)


def judge(result: dict) -> list[str]:
    """One line per target: the figure, the bound, met or MISSED (not judged on a --quick result)."""
    run = result["decoding"]
    record = run["summaries"]["record"]
    checks = [("full record / plain step (CPU)", run["record_over_plain"], RECORD_OVER_PLAIN_MAX, "{:.2f}×"),
              ("record + lens / plain step (CPU)", run["record_lens_over_plain"], RECORD_OVER_PLAIN_MAX, "{:.2f}×"),
              ("first token with the record, prefill included", record["first_token_s"], FIRST_TOKEN_MAX_S, "{:.3f} s"),
              (f"{run['new_tokens']} tokens with the record", record["total_s"], TOTAL_MAX_S, "{:.2f} s"),
              ("branch / the steps after it (CPU)", run["branch"]["branch_over_steps_after_cpu"], BRANCH_OVER_STEPS_AFTER_MAX,
               "{:.2f}×")]
    lines = []
    for name, value, bound, fmt in checks:
        if value is None:
            continue
        verdict = "not judged" if result.get("quick") else ("met" if value <= bound else "MISSED")
        lines.append(f"{name}: {fmt.format(value)} (target ≤ {fmt.format(bound)}) {verdict}")
    return lines
