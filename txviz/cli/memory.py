"""``txviz memory``: the KV cache and weight bytes of a published preset or any config.json, per token
and at a length, the MHA/GQA/MQA what-if, and what fits a GPU, as the KV page's calculator counts it."""

from __future__ import annotations

from txviz.cli.validators import positive


def register(command) -> None:
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
    p.add_argument("--prefill-chunk", type=positive, default=None,
                   help="tokens prefilled at a time: activations stop growing there (default: the whole prompt)")
    p.set_defaults(run=cmd_memory)


MAX_GPU_GIB, MAX_SEQ, MAX_BATCH = 1 << 20, 1 << 40, 1 << 20  # a PiB of GPU; beyond any real context or batch


def _memory_model(args):
    """(the MemoryModel, where it came from, extras that only a config.json gives)."""
    from txviz.analysis.kv import memory_model
    if args.preset:
        return memory_model.preset(args.preset), {"preset": args.preset}, {}
    from pathlib import Path

    from txviz.geometry import read_config
    geometry = read_config(Path(args.config))
    size = f"{geometry.architecture}, {geometry.n_params / 1e9:.2f} B params"
    model = memory_model.MemoryModel.from_geometry(geometry, size, f"config file {args.config}")
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
    from txviz.analysis.kv import memory, memory_model
    from txviz.analysis.kv.fit import max_context
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
              "kv_bytes_per_token": memory.token_kv_bytes(model, args.kv_dtype),
              "kv_bytes_per_token_past_windows": memory.token_kv_bytes_past_windows(model, args.kv_dtype),
              "kv_cache_bytes": memory.kv_cache_bytes_at(model, seq, args.batch, args.kv_dtype),
              "weight_bytes": memory.weight_bytes(model, args.weight_dtype),
              "kv_bytes_per_token_by_dtype": {d: memory.token_kv_bytes(model, d) for d in memory.KV_DTYPES},
              "weight_bytes_by_dtype": {d: memory.weight_bytes(model, d) for d in memory.weight_dtypes(model)},
              "flops_per_token": memory.token_flops(model, seq)}
    if model.kind != "MLA":  # the MHA/GQA/MQA what-if: the KV heads and the K/V projections serving them
        result["kinds"] = {kind: {"kv_heads": variant.kv_heads, "n_params": variant.n_params,
                                  "weight_bytes": memory.weight_bytes(variant, args.weight_dtype),
                                  "flops_per_token": memory.token_flops(variant, seq),
                                  "kv_bytes_per_token": memory.token_kv_bytes(variant, args.kv_dtype)}
                           for kind, variant in memory_model.kind_variants(model).items()}
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
        fit = max_context(model, args.gpu_gib, batch=args.batch, kv_dtype=args.kv_dtype,
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
