"""The lab's zoo for the MoE and design-tradeoffs pages: which variants are trained, loading one
(tiny, so several stay loaded beside the sidebar's model), the held-out stories as windows of its
context, their routing, a text's router trace, and the per-window losses behind the evaluation noise."""

from __future__ import annotations

from pathlib import Path

import torch

from txviz.analysis.moe.routing import ROUTER_CAPTURES, Routing, measure_routing
from txviz.capture.trace import Trace, trace
from txviz.loading import load
from txviz.loading.loaded import LoadedModel
from txviz.loading.zoo import EVAL_FILE, SHIPPED_ZOO, WEIGHTS_FILE

MOE_VARIANTS = ("moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")
VALIDATION_WINDOWS = 64  # × the training context (128): 8192 held-out tokens per measurement


def trained(names) -> list[str]:
    """The variants among ``names`` the shipped zoo holds (weights and evaluation written)."""
    return [n for n in names if (SHIPPED_ZOO / n / WEIGHTS_FILE).is_file() and (SHIPPED_ZOO / n / EVAL_FILE).is_file()]


def zoo_path(name: str) -> str:
    return str(SHIPPED_ZOO / name)


def load_zoo_model(name: str) -> LoadedModel:
    if name not in trained([name]):
        raise FileNotFoundError(f"the zoo has no trained {name!r} (txviz lab train {name})")
    return load(Path(zoo_path(name)), device="cpu")


def validation_windows(loaded: LoadedModel, n_windows: int = VALIDATION_WINDOWS) -> torch.Tensor:
    """(W, T) consecutive windows of the lab's held-out stories, each story opened by <|endoftext|>,
    encoded with the variant's own tokenizer; T = its training context."""
    from txviz.lab.corpus import stories
    from txviz.lab.zoo import CORPUS

    context = loaded.config.max_seq_len
    ids: list[int] = []
    for story in stories("val", CORPUS):
        ids.extend(loaded.tokenizer.encode(story, bos="bos").ids)
        if len(ids) >= n_windows * context:
            break
    usable = len(ids) // context * context
    return torch.tensor(ids[:min(usable, n_windows * context)]).reshape(-1, context)


def routing(loaded: LoadedModel, windows: torch.Tensor) -> Routing:
    return measure_routing(loaded.model, windows)


def text_trace(loaded: LoadedModel, text: str) -> tuple[tuple[str, ...], Trace]:
    """(tokens, router trace) of ``text`` under a zoo variant, cut to its context."""
    encoding = loaded.tokenizer.encode(text, bos="bos")
    ids = encoding.ids[:loaded.config.max_seq_len]
    return tuple(encoding.tokens[:len(ids)]), trace(loaded.model, torch.tensor(ids), capture=ROUTER_CAPTURES)


def stored_window_losses(name: str) -> torch.Tensor | None:
    """(W,) per-window losses the lab kept in the variant's eval.json, or None."""
    from txviz.lab.zoo import stored_window_losses as stored

    return stored(SHIPPED_ZOO / name)


def window_losses(loaded: LoadedModel) -> torch.Tensor:
    """(W,) mean loss of each held-out window evaluate() scores (their mean is eval.json's val_loss):
    the spread that gives the evaluation noise."""
    from txviz.lab.data import held_out_windows
    from txviz.lab.evaluate import window_losses as losses
    from txviz.lab.zoo import CORPUS

    windows = held_out_windows(loaded.tokenizer.backend, CORPUS, loaded.config.max_seq_len)
    return losses(loaded.model, windows)


def first_story() -> str:
    from txviz.lab.corpus import stories
    from txviz.lab.zoo import CORPUS

    return stories("val", CORPUS)[0]
