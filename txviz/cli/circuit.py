"""``txviz circuit`` and ``txviz qk``: the circuit of a prompt pair and the query–key breakdown of one
attention score, each refused first, as ``txviz patch`` is, above the app's limits or budget.

    txviz circuit --clean "…too big. The thing that was too big was the" \\
                  --corrupt "…too small. The thing that was too small was the" --answer trophy --wrong suitcase
    txviz qk --prompt "The trophy didn't fit in the suitcase because it was too big." \\
             --layer 10 --head 3 --query 9 --key 2 --json
"""

from __future__ import annotations

import argparse

from txviz.cli import model_options
from txviz.cli.console import progress
from txviz.cli.prompts import check_text, resolve_bos
from txviz.cli.validators import positive


def _fraction(text: str) -> float:
    """argparse type: a faithfulness target in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value:g}")
    return value


def _index(text: str) -> int:
    """argparse type: a layer, head or token index, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _loaded_with_text(args, texts: dict[str, str]):
    """The model, after each text was checked against the app's limits (before anything is loaded)."""
    from txviz import limits
    settings = limits.current()
    for label, text in texts.items():
        check_text(text, label, settings)
    loaded = model_options.load_model(args)
    if loaded.tokenizer is None:
        raise ValueError(f"this model has no tokenizer: {args.command} needs text")
    return loaded, settings


def cmd_circuit(args) -> dict:
    """EAP-IG scores of every edge, the exact faithfulness curve and the chosen circuit
    (txviz.circuit.report.circuit_report)."""
    import time

    from txviz import limits
    from txviz.circuit.cost import circuit_estimate
    from txviz.circuit.report import STEPS, circuit_report, encode_pair
    from txviz.threads import threads_for_this_run
    loaded, settings = _loaded_with_text(args, {"clean prompt": args.clean, "corrupt prompt": args.corrupt})
    clean, corrupt, _ = encode_pair(loaded.tokenizer, args.clean, args.corrupt, args.answer, args.wrong, args.bos)
    limits.check_prompt_tokens(len(clean.ids), loaded.config, settings)
    estimate = limits.check_budget(circuit_estimate(loaded.config, clean.ids, corrupt.ids, steps=args.steps,
                                                    search=args.edges is None, element_bytes=loaded.dtype.itemsize,
                                                    gflops=settings.gflops), settings)
    said = None if args.json or estimate.seconds < 5 else \
        lambda done, total: progress(done / total, f"batch {done} of at most {total}")
    started = time.perf_counter()
    with threads_for_this_run():  # one thread while other processes hold the cores, as the app does
        result = circuit_report(loaded.model, loaded.tokenizer, args.clean, args.corrupt, args.answer, args.wrong,
                                bos=args.bos, steps=args.steps, edges=args.edges, target=args.target, top=args.top,
                                progress=said)
    result = {"model": loaded.source, **result, "steps_run": list(STEPS[:3 if args.edges else 4]),
              "estimate": {"bytes": estimate.bytes, "seconds": round(estimate.seconds, 2)},
              "seconds": round(time.perf_counter() - started, 3)}
    if not args.json:
        _print_circuit(result, args.top)
    return result


def _print_circuit(result: dict, top: int) -> None:
    print(f"logit diff {result['answer_token']['text']!r} − {result['wrong_token']['text']!r}: "
          f"clean {result['clean_metric']:+.3f}, corrupt {result['corrupt_metric']:+.3f}")
    if not result["flips"]:
        gap = abs(result["clean_metric"] - result["corrupt_metric"])
        print(f"the pair does not flip the answer: the circuit explains a shift of {gap:.3f} in the logit difference, "
              "not a change of answer")
    print(f"{result['n_edges']:,} edges scored by EAP-IG ({result['steps']} steps); faithfulness of the top n:")
    print("  " + "  ".join(f"{p['edges']:,}: {p['faithfulness']:+.2f}" for p in result["curve"]))
    circuit = result["circuit"]
    if circuit["n_edges"] is None:
        print(f"no top-n circuit of the curve reaches faithfulness {circuit['target']}")
    else:
        print(f"circuit: {circuit['n_edges']:,} edges, faithfulness {circuit['faithfulness']:.3f}")
    print("source      target      input  score")
    for edge in result["edges"][:top]:
        print(f"{edge['source']:10s}  {edge['target']:10s}  {edge['input'] or '-':5s}  {edge['score']:+.4f}")


def cmd_qk(args) -> dict:
    """The head's pre-softmax score of key ``--key`` from query ``--query`` split into (query-side node,
    key-side node) pairs (txviz.circuit.qk), token indices as ``txviz trace`` numbers them."""
    from txviz import limits
    from txviz.circuit.cost import qk_estimate
    from txviz.circuit.report import qk_report
    loaded, settings = _loaded_with_text(args, {"prompt": args.prompt})
    args.bos = resolve_bos(args.bos, loaded.tokenizer)
    n = len(loaded.tokenizer.encode(args.prompt, bos=args.bos).ids)
    limits.check_prompt_tokens(n, loaded.config, settings)
    limits.check_budget(qk_estimate(loaded.config, n, element_bytes=loaded.dtype.itemsize, gflops=settings.gflops),
                        settings)
    result = qk_report(loaded.model, loaded.tokenizer, args.prompt, args.layer, args.head, args.query, args.key,
                       bos=args.bos, top=args.top)
    return {"model": loaded.source, **result}


def register(command) -> None:
    p = command("circuit", "the circuit between heads for a prompt pair: EAP-IG edges, exact faithfulness")
    p.add_argument("--clean", required=True, help="the prompt whose answer is explained")
    p.add_argument("--corrupt", required=True, help="its counterfactual, of the same token length")
    p.add_argument("--answer", required=True,
                   help="the word the clean prompt should name, scored as in txviz patch by its first token after a "
                        "space (' trophy')")
    p.add_argument("--wrong", required=True, help="the word it is compared with (scored the same way)")
    p.add_argument("--bos", choices=["none", "bos", "sink"], default="sink", help="token prepended to both prompts")
    p.add_argument("--steps", type=positive, default=5, help="EAP-IG interpolation steps (at least 1; 1 is EAP)")
    p.add_argument("--edges", type=positive, default=None,
                   help="the circuit's size: the top N edges (default: the smallest top-n circuit reaching --target)")
    p.add_argument("--target", type=_fraction, default=0.8, help="the faithfulness the circuit must reach (0, 1]")
    p.add_argument("--top", type=positive, default=50, help="edges listed, largest |score| first (at least 1)")
    p.set_defaults(run=cmd_circuit)
    p = command("qk", "why a head attends: its pre-softmax score split into (query node, key node) pairs")
    p.add_argument("--prompt", required=True)
    p.add_argument("--bos", choices=["app", "auto", "none", "bos", "sink"], default="app",
                   help="token prepended to the prompt, as txviz trace (default app: the sink token)")
    p.add_argument("--layer", type=_index, required=True)
    p.add_argument("--head", type=_index, required=True, help="a query head of --layer")
    p.add_argument("--query", type=_index, required=True, help="the attending token's index, as txviz trace numbers it")
    p.add_argument("--key", type=_index, required=True, help="the attended token's index (at most --query)")
    p.add_argument("--top", type=positive, default=20, help="pairs and value-side nodes listed (at least 1)")
    p.set_defaults(run=cmd_qk)
