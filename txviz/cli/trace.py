"""``txviz trace``: every head's attention metrics for a prompt, from summaries kept during the pass; with
``--plan``, only what the trace would keep and cost."""

from __future__ import annotations

import time

import torch

from txviz.cli import model_options
from txviz.cli.console import progress
from txviz.cli.prompts import check_text, resolve_bos


def register(command) -> None:
    p = command("trace", "per-head attention table for a prompt")
    p.add_argument("--prompt", required=True)
    p.add_argument("--bos", choices=["app", "auto", "none", "bos", "sink"], default="app",
                   help="token prepended to the prompt (default app: as the app's sidebar, the sink token, or "
                        "nothing when the model has none; auto: as the model's own tokenizer does)")
    p.add_argument("--plan", action="store_true",
                   help="only say what the trace would keep and cost, without running it")
    p.set_defaults(run=cmd_trace)


def cmd_trace(args) -> dict:
    """Every head's metrics, from per-row summaries computed during the pass (equal to the full maps'
    to float32 rounding): no T×T map is kept, so a prompt of the model's whole context fits."""
    from txviz.analysis.heads.metrics import metrics_table
    from txviz.capture.cost import capture_cost
    from txviz.capture.trace import trace
    from txviz import limits
    settings = limits.current()
    check_text(args.prompt, "prompt", settings)  # the app's limits, before anything is loaded
    loaded = model_options.load_model(args)
    config, element = loaded.config, loaded.dtype.itemsize
    args.bos = resolve_bos(args.bos, loaded.tokenizer)
    encoding = loaded.tokenizer.encode(args.prompt, bos=args.bos)
    n, capture = len(encoding.ids), ("head_summaries",)
    # summaries only, as the Attention page's long view: TXVIZ_MAX_LONG_TOKENS and the model's context,
    # checked before --plan answers, so a plan never promises what the run refuses
    limits.check_prompt_tokens(n, config, settings, long=True)
    estimate = limits.check_budget(limits.trace_estimate(config, n, capture, element_bytes=element,
                                                         gflops=settings.gflops), settings)
    cost = {"capture": list(capture), "stored_bytes": capture_cost(config, n, capture, element_bytes=element).stored_bytes,
            "estimated_bytes": estimate.bytes, "estimated_seconds": round(estimate.seconds, 2),
            "every_map_bytes": capture_cost(config, n, ("attn_probs",), element_bytes=element).stored_bytes}
    if args.plan:
        return {"model": loaded.source, "n_tokens": n, "cost": cost}
    started = time.perf_counter()
    tr = trace(loaded.model, torch.tensor(encoding.ids), capture=capture,
               progress=None if args.json or estimate.seconds < 5 else
               lambda done, total: progress(done / total, f"layer {done} of {total}"))
    seconds = time.perf_counter() - started
    tokens = [{"index": i, "id": tid, "text": text, "start": start, "end": end}
              for i, (tid, text, (start, end)) in enumerate(zip(encoding.ids, encoding.tokens, encoding.offsets))]
    return {"model": loaded.source, "bos": args.bos, "n_tokens": len(tokens), "seconds": round(seconds, 4),
            "cost": cost, "tokens": tokens, "heads": metrics_table(tr.head_metrics(), tr.layers)}
