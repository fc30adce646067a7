"""``txviz bench``: plain forward against trace against transformers, peak memory and decoding speed, on
the default model, a named one, several side by side (``--models``) or, with ``--quick``, a tiny random one
(the benchmark itself is txviz.bench)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from txviz.cli.console import progress
from txviz.cli.model_options import model_help
from txviz.cli.validators import positive


def register(command) -> None:
    p = command("bench", "time plain forward vs trace vs transformers, peak memory, decode tokens/s", model=False)
    p.add_argument("--tokens", type=bench_tokens, nargs="+", default=None,
                   help=f"prompt lengths, each 1..{MAX_BENCH_TOKENS:,} (default 64 256 1024 4096 8192; --quick: 64)")
    p.add_argument("--repeats", type=positive, default=None,
                   help="runs per method, at least 1; medians are reported (default 3; --quick: 1)")
    p.add_argument("--quick", action="store_true",
                   help="a seconds-long smoke run (64 tokens, one repeat) on a tiny random model, or on --model "
                        "when one is named (its targets are not judged)")
    p.add_argument("--threads", type=positive, default=None, help="torch threads in the workers (default: torch's)")
    p.add_argument("--decode-tokens", type=positive, default=None,
                   help="new tokens per generation, at least 1 (default 32; --quick: 8)")
    p.add_argument("--no-hf", action="store_true", help="skip the transformers reference")
    p.add_argument("--model", default=None, help=model_help())
    p.add_argument("--decoding", action="store_true",
                   help="only the decoding workload: a plain cached decode step against the per-step record (and "
                        "with the logit lens), the first token, the whole run and a branch, side by side "
                        "(--repeats: rounds; --decode-tokens: new tokens, default 48)")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="several models (names or paths) benchmarked one after another in this run, one table")
    p.add_argument("--peer", choices=("transformer-lens",), default=None,
                   help="the same work (every map, everything, summaries) asked of txviz and of TransformerLens, "
                        "fresh processes in turn (default --tokens 1024 4096, --repeats 5; needs the bench extra)")
    p.add_argument("--peer-python", default=None, metavar="PYTHON",
                   help="with --peer: the interpreter that has TransformerLens (default: this one)")
    p.add_argument("--peer-api", choices=("bridge", "hooked"), default=None,
                   help="with --peer: TransformerLens' model class: bridge (TransformerBridge, TransformerLens 4.x; "
                        "the default) or hooked (HookedTransformer, TransformerLens 3.x)")
    p.add_argument("--maps", choices=("fp16-packed", "fp32"), default="fp16-packed",
                   help="with --peer: how txviz keeps the maps (default fp16, lower triangle packed)")
    p.set_defaults(run=cmd_bench)


MAX_BENCH_TOKENS = 1 << 17  # 131,072: four times the longest context of a known model (Gemma 3 270M, 32,768)


def bench_tokens(text: str) -> int:
    return positive(text, MAX_BENCH_TOKENS)


def bench_source(model: str | None) -> str | None:
    """bench takes None (the default model) or a path: a known model's name becomes its fetched .gguf."""
    from txviz.loading import fetch
    from txviz.loading.sources import resolve_model_name
    known = resolve_model_name(model)
    if known is None or known.name == fetch.DEFAULT_MODEL.name:
        return None if known is not None else model
    return str(fetch.ensure(known, progress))


def bench_model(model: str | None) -> str | None:
    """``bench_source``, and a path that does not exist refused before any worker starts."""
    source = bench_source(model)
    if source is not None and not Path(source).expanduser().exists():
        from txviz.loading.errors import ModelLoadError
        raise ModelLoadError(f"no such file or directory: {source}")
    return source


def cmd_bench(args, *, run: Callable[..., dict] | None = None, decode_run: Callable[..., dict] | None = None) -> dict:
    """``run``: the benchmark (default txviz.bench.runner.run), given the lengths and every option;
    ``decode_run`` the decoding workload's (default txviz.bench.runner.run_decoding)."""
    from txviz.bench import report, runner
    if args.peer:
        return cmd_peer(args, run=run)
    run = run or runner.run
    # None: not given. Explicit values (at least 1, checked at parse time) are honoured, with or without --quick
    tokens = args.tokens if args.tokens is not None else (runner.QUICK_TOKENS if args.quick else runner.DEFAULT_TOKENS)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    decode_tokens = args.decode_tokens if args.decode_tokens is not None else (8 if args.quick else 32)
    options = dict(repeats=repeats, quick=args.quick, threads=args.threads, decode_tokens=decode_tokens, hf=not args.no_hf,
                   progress=lambda m: print(m, file=sys.stderr, flush=True))
    # --quick runs a tiny random model unless a model is named: then that one, the default included
    source = (lambda name: bench_model(name) or "default") if args.quick else bench_model
    if args.models:  # several models side by side in one run
        from txviz.bench.models import markdown_models, run_models
        result = run_models({name: source(name) for name in args.models}, tokens, run=run, **options)
        if not args.json:
            print(markdown_models(result))
        return result
    args.model = None if args.model is None else source(args.model)
    if args.decoding:
        return _decoding(args, repeats, decode_run)
    result = run(tokens, model=args.model, **options)
    if not args.json:
        print(report.markdown(result))
    return result


def _decoding(args, rounds: int, decode_run: Callable[..., dict] | None) -> dict:
    from txviz.bench import decoding_report, runner
    result = (decode_run or runner.run_decoding)(rounds=rounds, quick=args.quick, threads=args.threads, model=args.model,
                                                 new_tokens=args.decode_tokens if args.decode_tokens is not None else
                                                 (8 if args.quick else None),
                                                 progress=lambda m: print(m, file=sys.stderr, flush=True))
    if not args.json:
        print(decoding_report.markdown(result))
    return result


def cmd_peer(args, *, run: Callable[..., dict] | None = None) -> dict:
    """``--peer``: txviz.bench.peer's run (or ``run``), its report printed unless --json."""
    from txviz.bench import peer, peer_lens, peer_report
    run = run or peer.run
    result = run(tuple(args.tokens or peer.DEFAULT_TOKENS), repeats=args.repeats or peer.DEFAULT_REPEATS,
                 threads=args.threads, maps=args.maps, source=bench_model(args.model) or "default",
                 peer_python=args.peer_python, peer_api=args.peer_api or peer_lens.DEFAULT_API,
                 progress=lambda m: print(m, file=sys.stderr, flush=True))
    if not args.json:
        print(peer_report.markdown(result))
    return result
