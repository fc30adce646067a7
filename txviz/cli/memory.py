"""``txviz memory``: the KV cache and weight bytes of a published preset or any config.json, per token
and at a length, the MHA/GQA/MQA what-if, and what fits a GPU: the memory report the KV page's
calculator shows (txviz.analysis.kv.report), printed."""

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

    from txviz import limits
    from txviz.geometry import read_config
    geometry = read_config(Path(args.config), max_bytes=limits.current().max_config_bytes)
    size = f"{geometry.architecture}, {geometry.n_params / 1e9:.2f} B params"
    model = memory_model.MemoryModel.from_geometry(geometry, size, f"config file {args.config}")
    extras = {"model_type": geometry.model_type, "architecture": geometry.architecture,
              "warnings": list(geometry.assumptions) + list(geometry.ignored), "notes": list(geometry.notes),
              "tied_embeddings": geometry.tied_embeddings,
              "per_layer": {"kv_heads": list(geometry.kv_heads), "head_dim": list(geometry.head_dims),
                            "window": list(geometry.windows), "layer_type": list(geometry.layer_types),
                            "state_elements": list(geometry.state_elements),
                            "without_positions": list(geometry.positionless)},
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
    from txviz.analysis.kv.report import default_weight_dtype, memory_report
    if args.list:
        return {"presets": memory.list_presets()}
    model, origin, extras = _memory_model(args)
    seq = args.seq if args.seq is not None else model.max_context
    _check_memory_numbers(seq, args.batch, args.gpu_gib)
    weight_dtype = args.weight_dtype or default_weight_dtype(model)
    if weight_dtype not in memory.weight_dtypes(model):
        raise ValueError(f"--weight-dtype {weight_dtype!r}: this model publishes no quantization; "
                         f"choose from {', '.join(memory.WEIGHT_DTYPES)}")
    report = memory_report(model, seq, batch=args.batch, kv_dtype=args.kv_dtype, weight_dtype=weight_dtype,
                           prefill_chunk=args.prefill_chunk, gpu_gib=args.gpu_gib)
    notes = [] if not model.max_context or seq <= model.max_context else \
        [f"--seq {seq:,} is longer than the {model.max_context:,} tokens the model was built for"]
    return {**report.to_dict(origin, extras), "notes": extras.get("notes", []) + notes + report.notes}
