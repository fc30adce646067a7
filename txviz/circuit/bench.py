"""How fast circuit discovery is on a real model: EAP, EAP-IG, a faithfulness curve and one query–key
breakdown, beside a plain forward pass of the same prompt so the ratios carry to other machines.

    python -m txviz.circuit.bench                  # SmolLM2-135M on the trophy pair (24 tokens with the sink)
    python -m txviz.circuit.bench --threads 2 --repeats 3

Medians over ``repeats`` in this process, wall and CPU seconds; the model is loaded once. The clean and corrupt graph runs
that every method reuses are timed once (``pair_runs``) and kept, as a session would keep them; each
method's figure is its own cost on top. Targets on a 2-core CPU for SmolLM2 and the 24-token trophy
pair: EAP ≤ 2 s, EAP-IG (5 steps) ≤ 6 s, a 10-point curve ≤ 15 s, one breakdown ≤ 0.5 s, peak RSS ≤ 3 GB.
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from typing import Callable, Sequence

import torch

from txviz.causal.bench import TROPHY
from txviz.circuit.eap import eap, eap_ig
from txviz.circuit.metric import LogitDiff
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import faithfulness_curve
from txviz.circuit.qk import qk_attribution

TARGETS = {"eap": 2.0, "eap_ig_5": 6.0, "curve_10": 15.0, "qk": 0.5}


def _median_seconds(function: Callable[[], object], repeats: int) -> dict:
    """Median wall and CPU seconds (the process's, all threads): on a shared machine the CPU time is
    what the code costs, the wall time what the load made of it."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return {"wall": round(statistics.median(wall), 3), "cpu": round(statistics.median(cpu), 3)}


def circuit_benchmark(model, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, answer_id: int, wrong_id: int,
                      *, query: int, key: int, repeats: int = 3) -> dict:
    pair = CircuitPair(model, clean_ids, corrupt_ids, LogitDiff(answer_id, wrong_id))
    pair_seconds = _median_seconds(lambda: (pair.clean, pair.corrupt), 1)  # made once, then reused
    scores = eap_ig(pair, 5)
    layer, head = model.config.n_layers - 1, 0
    seconds = {
        "forward": _median_seconds(lambda: model(pair.clean_ids, last_only=True), repeats),
        "pair_runs": pair_seconds,
        "eap": _median_seconds(lambda: eap(pair), repeats),
        "eap_ig_5": _median_seconds(lambda: eap_ig(pair, 5), repeats),
        "curve_10": _median_seconds(lambda: faithfulness_curve(pair, scores, points=10), repeats),
        "qk": _median_seconds(lambda: qk_attribution(model, pair.clean_ids, layer, head, query, key,
                                                     outputs=pair.clean.outputs), repeats),
    }
    curve = faithfulness_curve(pair, scores, points=10)
    return {"n_tokens": int(pair.clean_ids.shape[1]), "n_edges": pair.graph.n_edges,
            "threads": torch.get_num_threads(), "seconds": seconds,
            "cpu_ratio_to_forward": {k: round(v["cpu"] / seconds["forward"]["cpu"], 1) for k, v in seconds.items()
                                     if k != "forward"},
            "targets_seconds": TARGETS, "clean_metric": pair.clean_metric, "corrupt_metric": pair.corrupt_metric,
            "curve": curve, "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 2)}


def trophy_benchmark(loaded, *, repeats: int = 3) -> dict:
    clean, corrupt, answer, wrong = TROPHY
    tokenizer = loaded.tokenizer
    clean_enc = tokenizer.encode(clean, bos="sink")
    clean_ids = torch.tensor(list(clean_enc.ids))
    corrupt_ids = torch.tensor(list(tokenizer.encode(corrupt, bos="sink").ids))
    answer_id, wrong_id = tokenizer.encode(answer, bos="none").ids[0], tokenizer.encode(wrong, bos="none").ids[0]
    tokens = list(clean_enc.tokens)
    query = len(tokens) - 1
    key = next(i for i, t in enumerate(tokens) if "trophy" in t)
    with torch.no_grad():
        result = circuit_benchmark(loaded.model, clean_ids, corrupt_ids, answer_id, wrong_id, query=query, key=key,
                                   repeats=repeats)
    return {"model": loaded.source, "qk_query_key": [query, key], **result}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from txviz.loading import load

    parser = argparse.ArgumentParser(prog="python -m txviz.circuit.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a shared machine more threads wait on each other at "
                             "OpenMP barriers and the figures measure the load, not the code)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; medians are reported")
    parser.add_argument("--model", default=None, help="a model name or path (default: SmolLM2)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        parser.error("--threads and --repeats must be at least 1")
    torch.set_num_threads(args.threads)
    print(json.dumps(trophy_benchmark(load(args.model, device="cpu"), repeats=args.repeats), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
