"""The ``txviz`` command line: fetch, info, trace, generate, coref, patch, memory, bench, lab — each with ``--json`` for scripts."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _progress(fraction: float, message: str) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _load(args):
    from txviz.model.placement import dispatch
    if args.device_map is None:
        return _load_on(args, args.device)
    if args.device is not None:
        raise ValueError("give --device or --device-map, not both")
    loaded = _load_on(args, "cpu")  # then spread from CPU memory
    dispatch(loaded.model, args.device_map, max_memory=_max_memory(args.max_memory), offload_dir=args.offload_dir)
    return loaded


def _load_on(args, device):
    """``--model``: a known model's name (fetched on first use, as the default model always was) or a path."""
    from txviz.loading import fetch, load, resolve_device
    from txviz.loading.sources import resolve_model_name
    known = resolve_model_name(args.model)
    if known is None:
        return load(args.model, device=device, dtype=DTYPES[args.dtype])
    quiet = args.json or fetch.is_fetched(known) or (known.name == fetch.DEFAULT_MODEL.name
                                                     and os.environ.get("TXVIZ_DEFAULT_GGUF"))
    return fetch.load_known_model(known, device=resolve_device(device), dtype=DTYPES[args.dtype],
                                  progress=None if quiet else _progress)


def _max_memory(text: str | None) -> dict[int | str, str] | None:
    """"0=20GiB,1=20GiB,cpu=64GiB" → {0: "20GiB", 1: "20GiB", "cpu": "64GiB"} (accelerate reads the sizes)."""
    if text is None:
        return None
    budget = {}
    for item in text.split(","):
        device, _, size = item.strip().partition("=")
        if not device or not size:
            raise ValueError(f"--max-memory takes DEVICE=SIZE items separated by commas, e.g. 0=20GiB,cpu=64GiB; "
                             f"got {item!r}")
        budget[int(device) if device.isdigit() else device] = size
    return budget


def cmd_fetch(args) -> dict:
    from txviz.loading import fetch
    from txviz.loading.sources import known_model
    model = known_model("default" if args.model is None else args.model)  # "" names no model
    progress = None if args.json else _progress
    started = time.perf_counter()
    path = fetch.ensure_default_model(progress) if model.name == fetch.DEFAULT_MODEL.name else \
        fetch.ensure_model(model, progress)
    return {"model": model.name, "path": str(path), "bytes": path.stat().st_size,
            "seconds": round(time.perf_counter() - started, 2)}


def cmd_info(args) -> dict:
    from txviz.loading.display_name import display_name
    from txviz.model.kv_cache import kv_bytes_per_token
    loaded = _load(args)
    config = loaded.config
    element = torch.finfo(loaded.dtype).bits / 8
    return {
        "name": display_name(loaded), "source": loaded.source, "format": loaded.format, "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."), "n_params": loaded.n_params,
        "attention": config.attention_kind, "kv_bytes_per_token": kv_bytes_per_token(config, element),
        "config": config.to_dict(), "device_map": getattr(loaded.model, "hf_device_map", None),
    }


def cmd_trace(args) -> dict:
    """Every head's metrics, from per-row summaries computed during the pass (equal to the full maps'
    to float32 rounding): no T×T map is kept, so a prompt of the model's whole context fits."""
    from txviz.analysis.heads.metrics import metrics_table
    from txviz.capture.cost import capture_cost
    from txviz.capture.trace import trace
    from txviz import limits
    settings = limits.current()
    _check_text(args.prompt, "prompt", settings)  # the app's limits, before anything is loaded
    loaded = _load(args)
    config, element = loaded.config, loaded.dtype.itemsize
    args.bos = _bos(args.bos, loaded.tokenizer)
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
               lambda done, total: _progress(done / total, f"layer {done} of {total}"))
    seconds = time.perf_counter() - started
    tokens = [{"index": i, "id": tid, "text": text, "start": start, "end": end}
              for i, (tid, text, (start, end)) in enumerate(zip(encoding.ids, encoding.tokens, encoding.offsets))]
    return {"model": loaded.source, "bos": args.bos, "n_tokens": len(tokens), "seconds": round(seconds, 4),
            "cost": cost, "tokens": tokens, "heads": metrics_table(tr.head_metrics(), tr.layers)}


def _bos(choice: str, tokenizer) -> str:
    """``auto``: what the model's own tokenizer does (Gemma prepends <bos>, SmolLM2 nothing). ``app``: the
    app's default, the sink token (SmolLM2 <|endoftext|>, Gemma <bos>), or nothing when the model has none."""
    if choice == "app":
        return "sink" if tokenizer.sink_id is not None else "none"
    if choice != "auto":
        return choice
    return "bos" if tokenizer.adds_bos and tokenizer.bos_id is not None else "none"


def cmd_generate(args) -> dict:
    from txviz.generate import Sampling, generate
    from txviz import limits
    settings = limits.current()
    limits.check_prompt_chars(len(args.prompt), settings)
    loaded = _load(args)
    tokenizer = loaded.tokenizer
    prompt = args.prompt
    if args.chat:
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}])
    args.bos = _bos(args.bos, tokenizer)
    ids = torch.tensor(tokenizer.encode(prompt, bos=args.bos).ids)
    _check_context(len(ids), max(0, args.max_new_tokens), loaded.config.max_seq_len)
    limits.check_prompt_tokens(len(ids), loaded.config, settings, n_new=max(0, args.max_new_tokens))
    if args.max_new_tokens >= 0:
        limits.check_budget(limits.generation_estimate(loaded.config, len(ids), args.max_new_tokens,
                                                       element_bytes=loaded.dtype.itemsize), limits.current())
    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    stop = () if tokenizer.eos_id is None else (tokenizer.eos_id,)
    result = generate(loaded.model, ids, args.max_new_tokens, sampling=sampling, stop_ids=stop)
    new_ids = list(result.new_ids)
    text = tokenizer.decode(new_ids, skip_special=True)
    if not args.json:
        print(text)
    return {"prompt": prompt, "text": text, "new_ids": new_ids,
            "kv_cache_bytes": [step.cache_bytes for step in result.steps]}


def _tokens(n: int) -> str:
    return f"{n:,} token" + ("" if n == 1 else "s")


def _check_context(n_prompt: int, n_new: int, context: int) -> None:
    """Prompt + new tokens past the model's context, said with the knob to turn: --max-new-tokens when
    the prompt alone fits."""
    if n_prompt + n_new <= context:
        return
    said = f"The prompt has {_tokens(n_prompt)} + {n_new:,} new = {n_prompt + n_new:,}; the model's context is " \
           f"{_tokens(context)}"
    if n_prompt < context:
        raise ValueError(f"{said}. Lower --max-new-tokens to at most {context - n_prompt:,}.")
    raise ValueError(f"{said}, and the prompt alone fills it. Shorten the prompt.")


def cmd_coref(args) -> dict:
    from txviz.analysis.coref.ranking import BUILTIN_PATH, evaluate, parse_cases
    from txviz import limits
    settings = limits.current()
    path = args.data or BUILTIN_PATH
    cases = parse_cases(path)  # a bad file fails here, before the model loads
    for number, case in enumerate(cases, start=1):
        _check_text(case.text, f"text of case {number}", settings)
    loaded = _load(args)
    _check_coref_budget(loaded, cases, args.bos, settings)
    started = time.perf_counter()
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


def cmd_patch(args) -> dict:
    """Which heads cause the answer: DLA, mean ablation and patching from the corrupt prompt per head
    (txviz.causal.report), refused first, as the app's causal run is, above the limits or the budget."""
    from txviz.causal.cost import pair_estimate
    from txviz.causal.patching import DEFAULT_CHUNK, check_same_length
    from txviz.causal.report import STEPS, patch_report
    from txviz import limits
    settings = limits.current()
    chunk_size = DEFAULT_CHUNK if args.chunk_size is None else args.chunk_size
    _check_text(args.clean, "clean prompt", settings)
    _check_text(args.corrupt, "corrupt prompt", settings)
    loaded = _load(args)
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
    progress = None if args.json or estimate.seconds < 5 else \
        lambda done, total: _progress(done / total, STEPS[done] if done < len(STEPS) else "done")
    started = time.perf_counter()
    result = patch_report(loaded.model, loaded.tokenizer, args.clean, args.corrupt, args.answer, args.wrong,
                          bos=args.bos, candidates=candidates, pronoun=args.pronoun, grid=args.grid,
                          top_k=args.top, chunk_size=chunk_size, progress=progress)
    result = {"model": loaded.source, **result, "estimate": {"bytes": estimate.bytes,
                                                             "seconds": round(estimate.seconds, 2)},
              "seconds": round(time.perf_counter() - started, 3)}
    if not args.json:
        _print_patch(result, args.top)
    return result


def _check_text(text: str, label: str, settings) -> None:
    """A prompt the app would take: not empty (the app refuses one: there is nothing to read) and within
    TXVIZ_MAX_PROMPT_CHARS, checked before the model loads."""
    from txviz import limits
    if not text.strip():
        raise ValueError(f"the {label} is empty: give the text to run")
    limits.check_prompt_chars(len(text), settings)


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


MAX_GPU_GIB, MAX_SEQ, MAX_BATCH = 1 << 20, 1 << 40, 1 << 20  # a PiB of GPU; beyond any real context or batch


def _memory_model(args):
    """(the MemoryModel, where it came from, extras that only a config.json gives)."""
    from txviz.analysis.kv import memory
    if args.preset:
        return memory.preset(args.preset), {"preset": args.preset}, {}
    from pathlib import Path

    from txviz.geometry import read_config
    geometry = read_config(Path(args.config))
    size = f"{geometry.architecture}, {geometry.n_params / 1e9:.2f} B params"
    model = memory.MemoryModel.from_geometry(geometry, size, f"config file {args.config}")
    extras = {"model_type": geometry.model_type, "architecture": geometry.architecture,
              "warnings": list(geometry.assumptions), "notes": list(geometry.notes),
              "tied_embeddings": geometry.tied_embeddings,
              "per_layer": {"kv_heads": list(geometry.kv_heads), "head_dim": list(geometry.head_dims),
                            "window": list(geometry.windows)},
              "moe_layers": geometry.moe_layers, "shared_experts": geometry.shared_experts}
    return model, {"config": args.config}, extras


def _check_memory_numbers(seq, batch: int, gpu_gib: float | None) -> None:
    if seq is None:
        raise ValueError("the config gives no context length (max_position_embeddings): pass --seq")
    if not 1 <= seq <= MAX_SEQ or not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"--seq must be 1..{MAX_SEQ:,} and --batch 1..{MAX_BATCH:,}, got {seq} and {batch}")
    if gpu_gib is not None and not 0 < gpu_gib <= MAX_GPU_GIB:  # also NaN
        raise ValueError(f"--gpu-gib must be above 0 and at most {MAX_GPU_GIB:,} GiB, got {gpu_gib}")


def cmd_memory(args) -> dict:
    from txviz.analysis.kv import memory
    if args.list:
        return {"presets": memory.list_presets()}
    model, origin, extras = _memory_model(args)
    seq = args.seq if args.seq is not None else model.max_context
    _check_memory_numbers(seq, args.batch, args.gpu_gib)
    args.weight_dtype = args.weight_dtype or (memory.PUBLISHED if model.weight_format else "bf16")
    if args.weight_dtype not in memory.weight_dtypes(model):
        raise ValueError(f"--weight-dtype {args.weight_dtype!r}: this model publishes no quantization; "
                         f"choose from {', '.join(memory.WEIGHT_DTYPES)}")
    result = {**origin, "model": model.name, "kind": model.kind, "source": model.source, **extras,
              "n_layers": model.n_layers, "n_heads": model.n_heads, "kv_heads": model.kv_heads,
              "head_dim": model.head_dim, "latent_dim": model.latent_dim, "rope_dim": model.rope_dim,
              "d_model": model.d_model, "vocab_size": model.vocab_size, "max_position_embeddings": model.max_context,
              "n_params": model.n_params, "active_params": model.active_params,
              "n_experts": model.n_experts, "experts_per_token": model.experts_per_token,
              "sliding_window": model.sliding_window, "window_layers": model.window_layers,
              "seq": seq, "batch": args.batch, "kv_dtype": args.kv_dtype, "weight_dtype": args.weight_dtype,
              "weight_format": None if model.weight_format is None else {
                  "scheme": model.weight_format.scheme, "bits_per_parameter": dict(model.weight_format.bits),
                  "assumption": model.weight_format.assumption},
              "kv_bytes_per_token": memory.kv_bytes_per_token(model, args.kv_dtype),
              "kv_bytes_per_token_past_windows": memory.kv_bytes_per_token_past_windows(model, args.kv_dtype),
              "kv_cache_bytes": memory.kv_cache_bytes(model, seq, args.batch, args.kv_dtype),
              "weight_bytes": memory.weight_bytes(model, args.weight_dtype),
              "kv_bytes_per_token_by_dtype": {d: memory.kv_bytes_per_token(model, d) for d in memory.KV_DTYPES},
              "weight_bytes_by_dtype": {d: memory.weight_bytes(model, d) for d in memory.weight_dtypes(model)},
              "flops_per_token": memory.flops_per_token(model, seq)}
    if model.kind != "MLA":  # the MHA/GQA/MQA what-if: the KV heads and the K/V projections serving them
        result["kinds"] = {kind: {"kv_heads": variant.kv_heads, "n_params": variant.n_params,
                                  "weight_bytes": memory.weight_bytes(variant, args.weight_dtype),
                                  "flops_per_token": memory.flops_per_token(variant, seq),
                                  "kv_bytes_per_token": memory.kv_bytes_per_token(variant, args.kv_dtype)}
                           for kind, variant in memory.kind_variants(model).items()}
    settings = dict(batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                    prefill_chunk=args.prefill_chunk)
    bill = memory.memory_bill(model, seq, **settings)
    result["bill"] = {"tokens": seq, "weights": bill.weights, "kv_cache": bill.kv_cache,
                      "activations": bill.activations, "total": bill.total, "prefill_chunk": args.prefill_chunk}
    notes = [] if not model.max_context or seq <= model.max_context else \
        [f"--seq {seq:,} is longer than the {model.max_context:,} tokens the model was built for"]
    if args.weight_dtype == memory.PUBLISHED:  # what stays unquantized is an assumption the reader should see
        notes.append(model.weight_format.assumption)
    if args.gpu_gib is not None:
        result["fits"] = _fits(model, args.gpu_gib, settings)
        notes.append(result["fits"]["note"])
        fit = memory.max_context(model, args.gpu_gib, batch=args.batch, kv_dtype=args.kv_dtype,
                                 weight_dtype=args.weight_dtype)
        result["max_context"] = {**fit.to_dict(), "counts": "weights + KV cache (no activations)"}
    return {**result, "notes": notes}


def _fits(model, gpu_gib: float, settings: dict) -> dict:
    """The KV page calculator's answer (txviz.analysis.kv.fit): the longest context whose weights + KV cache
    + activations fit, and the bill at the length it sums up."""
    from txviz.analysis.kv import memory
    from txviz.analysis.kv.fit import fit
    summary = fit(model, memory.context_lengths(int(model.max_context or 131072)), gpu_gib, **settings)
    longest, bill = summary.longest, summary.bill
    said = "no context length is too long" if longest is None else \
        "not even one token fits" if longest == 0 else f"{longest:,} tokens fit"
    built = f"; the model was built for {model.max_context:,}" if model.max_context else ""
    return {"longest_tokens": longest, "counts": "weights + KV cache + activations", "gpu_gib": gpu_gib,
            "at_tokens": summary.at, "weights": bill.weights, "kv_cache": bill.kv_cache,
            "activations": bill.activations, "total": bill.total, "free_gib": round(summary.free_gib, 4),
            "note": f"Counting weights, KV cache and activations (as the app's calculator), {said} in "
                    f"{gpu_gib:g} GiB{built}."}


def _bench_source(model: str | None) -> str | None:
    """bench takes None (the default model) or a path: a known model's name becomes its fetched .gguf."""
    from txviz.loading import fetch
    from txviz.loading.sources import resolve_model_name
    known = resolve_model_name(model)
    if known is None or known.name == fetch.DEFAULT_MODEL.name:
        return None if known is not None else model
    return str(fetch.ensure_model(known, _progress))


def _bench_model(model: str | None) -> str | None:
    """``_bench_source``, and a path that does not exist refused before any worker starts."""
    source = _bench_source(model)
    if source is not None and not Path(source).expanduser().exists():
        from txviz.loading.errors import ModelLoadError
        raise ModelLoadError(f"no such file or directory: {source}")
    return source


def _positive(text: str, most: int | None = None) -> int:
    """argparse type: a whole number of at least 1 (a count of tokens, repeats or threads) and at most
    ``most``, refused at parse time."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"must be at most {most:,}, got {value:,}")
    return value


MAX_BENCH_TOKENS = 1 << 17  # 131,072: four times the longest context of a known model (Gemma 3 270M, 32,768)


def _bench_tokens(text: str) -> int:
    return _positive(text, MAX_BENCH_TOKENS)


def cmd_bench(args) -> dict:
    from txviz import bench
    # None: not given. Explicit values (at least 1, checked at parse time) are honoured, with or without --quick
    tokens = args.tokens if args.tokens is not None else (bench.QUICK_TOKENS if args.quick else bench.DEFAULT_TOKENS)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    decode_tokens = args.decode_tokens if args.decode_tokens is not None else (8 if args.quick else 32)
    options = dict(repeats=repeats, quick=args.quick, threads=args.threads, decode_tokens=decode_tokens, hf=not args.no_hf,
                   progress=lambda m: print(m, file=sys.stderr, flush=True))
    # --quick runs a tiny random model unless a model is named: then that one, the default included
    source = (lambda name: _bench_model(name) or "default") if args.quick else _bench_model
    if args.models:  # several models side by side in one run
        from txviz.bench.models import markdown_models, run_models
        result = run_models({name: source(name) for name in args.models}, tokens, run=bench.run, **options)
        if not args.json:
            print(markdown_models(result))
        return result
    args.model = None if args.model is None else source(args.model)
    result = bench.run(tokens, model=args.model, **options)
    if not args.json:
        print(bench.markdown(result))
    return result


def build_parser() -> argparse.ArgumentParser:
    from txviz.loading.sources import known_names
    from txviz.model.placement import STRATEGIES
    MODEL_HELP = f"a known model ({known_names()}; fetched on first use), a .gguf file or an HF checkpoint directory " \
                 "(default: SmolLM2-135M-Instruct)"
    parser = argparse.ArgumentParser(prog="txviz", description="See inside a real decoder-only transformer.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, *, model: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--json", action="store_true",
                       help="print one JSON object on one line (without it: the same object indented, or text for "
                            "generate, coref, patch and bench)")
        if model:
            p.add_argument("--model", default=None, help=MODEL_HELP)
            p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
            p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
            p.add_argument("--device-map", choices=STRATEGIES, default=None,
                           help="spread the model over GPUs, CPU and disk with accelerate (txviz.model.placement)")
            p.add_argument("--max-memory", default=None, help="budget per device for --device-map, e.g. 0=20GiB,cpu=64GiB")
            p.add_argument("--offload-dir", default=None, help="where --device-map writes the parts sent to disk")
        return p

    p = command("fetch", "download a known model (default: SmolLM2-135M-Instruct) into the cache (TXVIZ_HOME)", model=False)
    p.add_argument("--model", default=None, help=f"a known model: {known_names()}")
    p.set_defaults(run=cmd_fetch)
    command("info", "config, parameter count and KV bytes per token").set_defaults(run=cmd_info)
    p = command("trace", "per-head attention table for a prompt")
    p.add_argument("--prompt", required=True)
    p.add_argument("--bos", choices=["app", "auto", "none", "bos", "sink"], default="app",
                   help="token prepended to the prompt (default app: as the app's sidebar, the sink token, or "
                        "nothing when the model has none; auto: as the model's own tokenizer does)")
    p.add_argument("--plan", action="store_true",
                   help="only say what the trace would keep and cost, without running it")
    p.set_defaults(run=cmd_trace)
    p = command("generate", "generate text with the KV cache")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--bos", choices=["auto", "none", "bos", "sink"], default="auto",
                   help="token prepended to the prompt (default auto: as the model's own tokenizer does, as "
                        "generation expects; the app's Attention views default to sink)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_generate)
    p = command("coref", "rank heads by pronoun→antecedent attention on labeled sentences")
    p.add_argument("--data", default=None, help="JSONL of cases (default: the built-in agreement set)")
    p.add_argument("--bos", choices=["none", "bos", "sink"], default="sink", help="token prepended to each sentence")
    p.add_argument("--top", type=_positive, default=10, help="heads to print without --json (at least 1)")
    p.set_defaults(run=cmd_coref)
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
    p.add_argument("--top", type=_positive, default=10,
                   help="heads printed without --json; k of the top-k agreement (at least 1)")
    p.add_argument("--chunk-size", type=_positive, default=None,
                   help="interventions per batched forward call (default: txviz.causal.patching.DEFAULT_CHUNK, 16)")
    p.set_defaults(run=cmd_patch)
    from txviz.analysis.kv.memory import KV_DTYPES, PUBLISHED, WEIGHT_DTYPES
    p = command("memory", "KV cache and weight bytes of a preset or a config.json; what fits a GPU", model=False)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--preset", help="a published model (see --list)")
    which.add_argument("--config", help="a Hugging Face config.json of any causal LM (or the directory holding it)")
    which.add_argument("--list", action="store_true", help="list the presets")
    p.add_argument("--seq", type=int, default=None, help="tokens per sequence (default: the model's context)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16")
    p.add_argument("--weight-dtype", choices=(PUBLISHED, *WEIGHT_DTYPES), default=None,
                   help=f"weights' format (default: {PUBLISHED!r}, the config's quantization_config, where it "
                        "gives one; else bf16)")
    p.add_argument("--gpu-gib", type=float, default=None,
                   help="GPU memory: report the longest context whose weights + KV cache + activations fit "
                        "(\"fits\", as the app's calculator) and, KV only, \"max_context\"")
    p.add_argument("--prefill-chunk", type=_positive, default=None,
                   help="tokens prefilled at a time: activations stop growing there (default: the whole prompt)")
    p.set_defaults(run=cmd_memory)
    p = command("bench", "time plain forward vs trace vs transformers, peak memory, decode tokens/s", model=False)
    p.add_argument("--tokens", type=_bench_tokens, nargs="+", default=None,
                   help=f"prompt lengths, each 1..{MAX_BENCH_TOKENS:,} (default 64 256 1024 4096 8192; --quick: 64)")
    p.add_argument("--repeats", type=_positive, default=None,
                   help="runs per method, at least 1; medians are reported (default 3; --quick: 1)")
    p.add_argument("--quick", action="store_true",
                   help="a seconds-long smoke run (64 tokens, one repeat) on a tiny random model, or on --model "
                        "when one is named (its targets are not judged)")
    p.add_argument("--threads", type=_positive, default=None, help="torch threads in the workers (default: torch's)")
    p.add_argument("--decode-tokens", type=_positive, default=None,
                   help="new tokens per generation, at least 1 (default 32; --quick: 8)")
    p.add_argument("--no-hf", action="store_true", help="skip the transformers reference")
    p.add_argument("--model", default=None, help=MODEL_HELP)
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="several models (names or paths) benchmarked one after another in this run, one table")
    p.set_defaults(run=cmd_bench)
    from txviz.lab.cli import add_lab_commands
    add_lab_commands(sub)  # lab list / lab train
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, FileNotFoundError) as error:  # our errors are ValueErrors with a message for people
        if getattr(args, "json", False):
            print(json.dumps({"error": str(error), "type": type(error).__name__}))
        else:
            print(f"txviz: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    elif args.command not in ("generate", "coref", "patch", "bench"):  # these print their own text
        print(json.dumps(result, indent=2))
    return 0

