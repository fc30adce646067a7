"""``txviz fetch`` downloads a known model into the cache; ``txviz info`` says what a model is: its config,
parameter count and KV bytes per token."""

from __future__ import annotations

import time

import torch

from txviz.cli import model_options
from txviz.cli.console import progress


def register(command) -> None:
    from txviz.loading.sources import known_names
    p = command("fetch", "download a known model (default: SmolLM2-135M-Instruct) into the cache (TXVIZ_HOME)", model=False)
    p.add_argument("--model", default=None, help=f"a known model: {known_names()}")
    p.set_defaults(run=cmd_fetch)
    command("info", "config, parameter count and KV bytes per token").set_defaults(run=cmd_info)


def cmd_fetch(args) -> dict:
    from txviz.loading import fetch
    from txviz.loading.sources import known_model
    model = known_model("default" if args.model is None else args.model)  # "" names no model
    said = None if args.json else progress
    started = time.perf_counter()
    path = fetch.ensure(model, said)
    return {"model": model.name, "path": str(path), "bytes": path.stat().st_size,
            "seconds": round(time.perf_counter() - started, 2)}


def cmd_info(args) -> dict:
    from txviz.loading.display_name import display_name
    from txviz.model.kv_cache import kv_bytes_per_token
    loaded = model_options.load_model(args)
    config = loaded.config
    element = torch.finfo(loaded.dtype).bits / 8
    return {
        "name": display_name(loaded), "source": loaded.source, "format": loaded.format, "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."), "n_params": loaded.n_params,
        "attention": config.attention_kind, "kv_bytes_per_token": kv_bytes_per_token(config, element),
        "config": config.to_dict(), "device_map": getattr(loaded.model, "hf_device_map", None),
    }
