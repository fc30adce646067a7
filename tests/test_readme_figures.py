"""The README's figures about the models, recomputed: each test reads its number out of README.md and
compares it with the value computed now, to the precision the README writes it with, so that a changed
README or a changed model (or zoo, or formula) breaks the test.

Checked here: the zoo's variant count; the labeled coreference set's size; the MoE balance finding
(mean effective experts of the top-1 and top-2 routers, with and without the balancing loss, on the 64
held-out windows the MoE page measures); the MHA/GQA/MQA loss spread against its standard error (every
held-out window); on the default model, the cost of keeping every attention map and of the capture plan
chosen at the default memory budget for 8008 tokens, the size of the GGUF and of its float32 copy.

Left unchecked, and why:
- the KV layer-sharing sweep on SmolLM2 (layers 0 and 1 at KL 1.1 and 1.9 nats, 6, 29, 7, 28 at ≤ 0.03,
  the 5 cheapest saving 11% for perplexity 23.5 → 26.0): 38 forward passes of the 135M model, about a
  minute on this 2-core machine (tests/analysis/kv/test_kv_sharing.py checks the sweep itself on tiny models);
- "0 on SmolLM2" for the Winograd pronoun row: a property of causal attention, tested with the coreference page;
- the 93 MB wheel: pip's download is not kept once the GGUF is taken out of it;
- timings (set-up and test-suite minutes, 17 s to the first heatmap, the Benchmarks paragraph): one-off
  measurements on a shared machine, said so in the README; ``txviz bench`` and ``python -m tests.helpers.bench_app``
  measure them (tests/bench/test_bench.py, tests/app/test_bench_app.py run both).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.helpers import zoo_losses
from txviz.loading.zoo import SHIPPED_ZOO

ROOT = Path(__file__).resolve().parents[1]
README = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())  # phrases may wrap


def figures(pattern: str) -> tuple[str, ...]:
    """The numbers the README writes where ``pattern`` (a regex with groups) matches, as written."""
    match = re.search(pattern, README)
    assert match, f"the README no longer says {pattern!r}: update it and this test together"
    return match.groups()


def agrees(written: str, computed: float, slack: float = 0.0) -> bool:
    """Whether ``computed`` rounds to the README's ``written`` number (to its last written digit)."""
    decimals = len(written.split(".")[1]) if "." in written else 0
    return abs(computed - float(written)) <= 0.5 * 10 ** -decimals + slack + 1e-12


# ---- the zoo and the shipped data -----------------------------------------------------------------
def test_the_zoo_variant_count():
    [count] = figures(r"\(([0-9]+) variants that differ in one choice each")
    shipped = [d for d in SHIPPED_ZOO.iterdir() if (d / "config.json").is_file()]
    assert int(count) == len(shipped)


def test_the_labeled_coreference_set_size():
    [count] = figures(r"built-in labeled set of ([0-9]+) sentences")
    lines = (ROOT / "assets" / "coref" / "agreement.jsonl").read_text(encoding="utf-8").splitlines()
    assert int(count) == len([json.loads(line) for line in lines if line.strip()])


def test_the_moe_balance_finding():
    """Mean effective experts over the layers, measured as the MoE page does (64 held-out windows)."""
    from txviz.analysis.moe.routing import measure_routing

    written = figures(r"collapses onto few experts \(([0-9.]+) of 4 effective, against ([0-9.]+) balanced\) "
                      r"while top-2 barely does \(([0-9.]+) against ([0-9.]+)\)")
    names = ("moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")
    measured = []
    for name in names:
        loaded, windows = zoo_losses.held_out(name)
        measured.append(float(measure_routing(loaded.model, windows[:64, :-1]).effective_experts.mean()))
    assert all(agrees(w, m) for w, m in zip(written, measured)), dict(zip(names, measured))


@pytest.mark.xdist_group(zoo_losses.GROUP)  # scored once for this test and tests/lab's rebuild of eval.json
def test_the_attention_kinds_loss_spread_and_its_noise():
    """The MHA, GQA and MQA variants' losses over every held-out window, scored now with the shipped
    weights: their spread and the largest standard error (txviz.analysis.tradeoffs.noise, as the Design
    tradeoffs page computes them)."""
    from txviz.analysis.tradeoffs.noise import loss_estimate

    spread, standard_error = figures(r"the three differ by ([0-9.]+) nats against a standard error of ([0-9.]+)")
    estimates = [loss_estimate(name, zoo_losses.window_losses(name)) for name in ("mha", "base", "mqa")]
    means = [e.mean for e in estimates]
    assert agrees(spread, max(means) - min(means)), estimates
    assert agrees(standard_error, max(e.se for e in estimates)), estimates


# ---- the default model (SmolLM2-135M-Instruct) ---------------------------------------------------------
def test_the_cost_of_every_map_and_of_the_chosen_capture_at_8008_tokens(default_model):
    from txviz.capture.cost import capture_cost, choose_capture
    from txviz.limits import GIB, MIB, Limits

    every_gib, tokens = figures(r"keeping every map would cost \(([0-9.]+) GiB at ([0-9]+) tokens\)")
    plan_mib, plan_tokens = figures(r"every head's per-row summaries plus q/k, ([0-9.]+) MiB at ([0-9]+) tokens")
    assert tokens == plan_tokens
    config, element = default_model.config, default_model.dtype.itemsize
    every = capture_cost(config, int(tokens), ("attn_probs",), element_bytes=element).stored_bytes
    plan = choose_capture(config, int(tokens), Limits().memory_budget_bytes, element_bytes=element)
    assert "q_rot" in plan.capture  # the plan the README describes: summaries plus q/k
    assert agrees(every_gib, every / GIB) and agrees(plan_mib, plan.cost.stored_bytes / MIB)


def test_the_gguf_and_its_float32_copy(default_gguf_path, default_model_home, default_model):
    gguf_mb, copy_mb = figures(r"the ([0-9]+) MB GGUF is taken; it is dequantized once and kept as a ([0-9]+) MB "
                               r"float32 copy")
    from txviz.loading.gguf.float32_copy import dequantized_copy_path

    copy = dequantized_copy_path(Path(default_gguf_path))  # the home also holds Gemma 3's copy (its own test)
    assert agrees(gguf_mb, Path(default_gguf_path).stat().st_size / 1e6)
    assert agrees(copy_mb, copy.stat().st_size / 1e6, slack=5)  # written to two significant digits
    n_params = sum(p.numel() for p in default_model.model.parameters())
    assert copy.stat().st_size == pytest.approx(n_params * torch.finfo(torch.float32).bits // 8, rel=0.01)
