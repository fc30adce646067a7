"""``txviz patch``: which heads cause the answer on a clean/corrupt prompt pair: direct logit attribution,
mean ablation and activation patching per head, with a warning first when the pair flips nothing."""

from __future__ import annotations

import time

import torch

from txviz.cli import model_options
from txviz.cli.console import progress
from txviz.cli.prompts import check_text
from txviz.cli.validators import positive


def register(command) -> None:
    p = command("patch", "which heads cause the answer: DLA, ablation and patching on a prompt pair")
    p.add_argument("--clean", required=True, help="the prompt whose answer is explained")
    p.add_argument("--corrupt", required=True, help="its counterfactual, of the same token length")
    p.add_argument("--answer", required=True,
                   help="the word the clean prompt should name, e.g. trophy: scored, as in the app, by its first "
                        "token after a space (' trophy'); the output names that token")
    p.add_argument("--wrong", required=True, help="the word it is compared with, e.g. suitcase (scored the same way)")
    p.add_argument("--bos", choices=["none", "bos", "sink"], default="sink", help="token prepended to both prompts")
    p.add_argument("--candidates", default=None,
                   help="comma-separated candidate words: adds each head's attention margin from --pronoun")
    p.add_argument("--pronoun", default="it", help="the word whose attention row --candidates scores")
    p.add_argument("--grid", action="store_true", help="also patch the residual stream per (layer, position)")
    p.add_argument("--top", type=positive, default=10,
                   help="heads printed without --json; k of the top-k agreement (at least 1)")
    p.add_argument("--chunk-size", type=positive, default=None,
                   help="interventions per batched forward call (default: txviz.causal.patching.DEFAULT_CHUNK, 16)")
    p.set_defaults(run=cmd_patch)


def cmd_patch(args) -> dict:
    """Which heads cause the answer: DLA, mean ablation and patching from the corrupt prompt per head
    (txviz.causal.report), refused first, as the app's causal run is, above the limits or the budget."""
    from txviz.causal.cost import pair_estimate
    from txviz.causal.patching import DEFAULT_CHUNK, check_same_length
    from txviz.causal.report import STEPS, patch_report
    from txviz import limits
    from txviz.threads import threads_for_this_run
    settings = limits.current()
    chunk_size = DEFAULT_CHUNK if args.chunk_size is None else args.chunk_size
    check_text(args.clean, "clean prompt", settings)
    check_text(args.corrupt, "corrupt prompt", settings)
    loaded = model_options.load_model(args)
    if loaded.tokenizer is None:
        raise ValueError("this model has no tokenizer: patch needs text")
    clean, corrupt = (loaded.tokenizer.encode(text, bos=args.bos).ids for text in (args.clean, args.corrupt))
    for ids in (clean, corrupt):
        limits.check_prompt_tokens(len(ids), loaded.config, settings)
    check_same_length(torch.tensor(clean), torch.tensor(corrupt))
    candidates = None if args.candidates is None else args.candidates.split(",")
    estimate = limits.check_budget(pair_estimate(loaded.config, clean, corrupt, element_bytes=loaded.dtype.itemsize,
                                                 gflops=settings.gflops, grid=args.grid, margins=bool(candidates),
                                                 chunk_size=chunk_size), settings)
    said = None if args.json or estimate.seconds < 5 else \
        lambda done, total: progress(done / total, STEPS[done] if done < len(STEPS) else "done")
    started = time.perf_counter()
    with threads_for_this_run():  # one thread while other processes hold the cores, as the app does
        result = patch_report(loaded.model, loaded.tokenizer, args.clean, args.corrupt, args.answer, args.wrong,
                              bos=args.bos, candidates=candidates, pronoun=args.pronoun, grid=args.grid,
                              top_k=args.top, chunk_size=chunk_size, progress=said)
    result = {"model": loaded.source, **result, "estimate": {"bytes": estimate.bytes,
                                                             "seconds": round(estimate.seconds, 2)},
              "seconds": round(time.perf_counter() - started, 3)}
    if not args.json:
        _print_patch(result, args.top)
    return result


def _round(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _scored(word: dict) -> str:
    """" trophy", or " suit" of " suit" + "case": the token a word is scored by, and the word's tokens."""
    pieces = word.get("of") or [word["text"]]
    return f"{word['text']!r}" + ("" if len(pieces) < 2 else f" (the first of {' + '.join(map(repr, pieces))})")


def _print_patch(result: dict, top: int) -> None:
    from txviz.causal.attribution import correlation_text
    from txviz.causal.flip import no_flip_message
    warning = no_flip_message(result["answer_flip"], repr(result["answer_token"]["text"]),
                              repr(result["wrong_token"]["text"]))
    if warning:  # first, before any ranking: the heads below are no finding about the answer
        print(f"NOT A FINDING. {warning}")
    print(f"scored by first tokens: answer {_scored(result['answer_token'])}, wrong {_scored(result['wrong_token'])}")
    print(f"logit diff {result['answer_token']['text']!r} − {result['wrong_token']['text']!r}: "
          f"clean {result['clean_logit_diff']:+.3f}, corrupt {result['corrupt_logit_diff']:+.3f}")
    print("layer  head  patching  ablation     dla")
    for row in sorted(result["heads"], key=lambda r: -abs(r["patching"]))[:top]:
        print(f"{row['layer']:5d}  {row['head']:4d}  {row['patching']:+8.3f}  {row['ablation']:+8.3f}  {row['dla']:+6.3f}")
    for label, key in (("attribution patching", "attribution_agreement"), ("attention margin", "margin_patching_agreement")):
        if key in result:
            figures = result[key]
            print(f"{label} vs exact patching: spearman {correlation_text(figures['spearman'], 3)}, "
                  f"top-{figures['k']} overlap {_round(figures['top_k_overlap'])}")
