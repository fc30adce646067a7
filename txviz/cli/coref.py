"""``txviz coref``: every head ranked by how often the pronoun attends most to its antecedent, on labeled
sentences (the built-in agreement set or a JSONL file), within the app's limits and budget."""

from __future__ import annotations

import time

from txviz.cli import model_options
from txviz.cli.prompts import check_text
from txviz.cli.validators import positive


def register(command) -> None:
    p = command("coref", "rank heads by pronoun→antecedent attention on labeled sentences")
    p.add_argument("--data", default=None, help="JSONL of cases (default: the built-in agreement set)")
    p.add_argument("--bos", choices=["none", "bos", "sink"], default="sink", help="token prepended to each sentence")
    p.add_argument("--top", type=positive, default=10, help="heads to print without --json (at least 1)")
    p.set_defaults(run=cmd_coref)


def cmd_coref(args) -> dict:
    from txviz.analysis.coref.ranking import BUILTIN_PATH, evaluate, parse_cases
    from txviz import limits
    from txviz.threads import threads_for_this_run
    settings = limits.current()
    path = args.data or BUILTIN_PATH
    cases = parse_cases(path)  # a bad file fails here, before the model loads
    for number, case in enumerate(cases, start=1):
        check_text(case.text, f"text of case {number}", settings)
    loaded = model_options.load_model(args)
    _check_coref_budget(loaded, cases, args.bos, settings)
    started = time.perf_counter()
    with threads_for_this_run():  # one thread while other processes hold the cores, as the app does
        result = {**evaluate(loaded, cases, bos=args.bos), "data": str(path)}
    result["seconds"] = round(time.perf_counter() - started, 3)
    if not args.json:
        baselines = result["baselines"]
        print(f"{result['n_cases']} cases from {path}, bos={args.bos}, {result['seconds']} s")
        print(f"baselines: nearest {baselines['nearest']:.3f}, first {baselines['first']:.3f}")
        if result["n_after_pronoun"]:
            print(f"note: {result['n_after_pronoun']} case(s) have a candidate after the pronoun, "
                  "which a causal model's pronoun cannot attend to")
        print("layer  head  accuracy  margin")
        for row in result["heads"][:args.top]:
            print(f"{row['layer']:5d}  {row['head']:4d}  {row['accuracy']:8.3f}  {row['margin']:+.4f}")
    return result


def _check_coref_budget(loaded, cases, bos: str, settings) -> None:
    """The app's check of the coreference set (app/services/heads.py): every case within the token limit
    and the model's context, and one pass per case keeping every map of the longest within the budget."""
    from txviz import limits
    lengths = [len(loaded.tokenizer.encode(case.text, bos=bos).ids) for case in cases]
    for length in lengths:
        limits.check_prompt_tokens(length, loaded.config, settings)
    one = limits.trace_estimate(loaded.config, max(lengths), ("attn_probs",), element_bytes=loaded.dtype.itemsize,
                                gflops=settings.gflops)
    limits.check_budget(limits.Estimate(f"scoring every head on {len(cases)} sentences", one.bytes,
                                        one.seconds * len(cases)), settings)
