"""The options every model command takes (``--model``, ``--device``, ``--dtype``, ``--device-map``,
``--max-memory``, ``--offload-dir``) and the model they load: a known model fetched on first use, a
Hub id, a .gguf file or a checkpoint directory, on one device or spread with accelerate."""

from __future__ import annotations

import argparse

import torch

from txviz.cli.console import progress

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def model_help() -> str:
    from txviz.loading.sources import known_names
    return f"a known model ({known_names()}; fetched on first use), a .gguf file, an HF checkpoint directory " \
           "or a Hub id org/name[@revision] (downloaded into the Hub's cache) (default: SmolLM2-135M-Instruct)"


def add_model_options(p: argparse.ArgumentParser) -> None:
    from txviz.model.placement import STRATEGIES
    p.add_argument("--model", default=None, help=model_help())
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    p.add_argument("--device-map", choices=STRATEGIES, default=None,
                   help="spread the model over GPUs, CPU and disk with accelerate (txviz.model.placement)")
    p.add_argument("--max-memory", default=None, help="budget per device for --device-map, e.g. 0=20GiB,cpu=64GiB")
    p.add_argument("--offload-dir", default=None, help="where --device-map writes the parts sent to disk")


def load_model(args):
    """The model ``--model`` names, placed as ``--device`` or ``--device-map`` asks."""
    from txviz.model.placement import dispatch
    if args.device_map is None:
        return _load_on(args, args.device)
    if args.device is not None:
        raise ValueError("give --device or --device-map, not both")
    loaded = _load_on(args, "cpu")  # then spread from CPU memory
    dispatch(loaded.model, args.device_map, max_memory=max_memory(args.max_memory), offload_dir=args.offload_dir)
    return loaded


def _load_on(args, device):
    """``--model``: a known model's name (fetched on first use, as the default model always was), a Hub id or a path."""
    from txviz.loading import fetch, load, resolve_device
    from txviz.loading.hub_id import looks_like_hub_id
    from txviz.loading.known import load_known_model
    from txviz.loading.sources import resolve_model_name

    if args.model and looks_like_hub_id(args.model):
        from txviz.loading.hub import load_hub_model
        return load_hub_model(args.model, device=resolve_device(device), dtype=DTYPES[args.dtype],
                              progress=None if args.json else progress)
    known = resolve_model_name(args.model)
    if known is None:
        return load(args.model, device=device, dtype=DTYPES[args.dtype])
    quiet = args.json or not fetch.will_download(known)
    return load_known_model(known, device=resolve_device(device), dtype=DTYPES[args.dtype],
                            progress=None if quiet else progress)


def max_memory(text: str | None) -> dict[int | str, str] | None:
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
