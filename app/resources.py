"""Process-wide caches: one model per source (``st.cache_resource``), traces per (model, prompt, options).

Traces are immutable, so they live in ``cache_resource`` too and are shared between sessions without
the pickle round trip ``cache_data`` would make on every read (a full set of maps is megabytes to
gigabytes). Changing layer or head therefore never reruns the model.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from txviz.analysis.heads import head_table
from txviz.loading import load
from txviz.loading.loaded import LoadedModel
from txviz.trace import Trace, trace

MAX_TOKENS = int(os.environ.get("TXVIZ_MAX_TOKENS", "1024"))  # attention maps grow with T²


@dataclass(frozen=True)
class PromptTrace:
    """A prompt's tokens and what the model did with them."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]
    trace: Trace
    seconds: float

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


class PromptError(ValueError):
    """A prompt the app cannot trace; the message says why and what to change."""


@st.cache_resource(show_spinner=False, max_entries=2)
def get_model(source: str) -> LoadedModel:
    return load(None if source == "default" else source)


def display_name(loaded: LoadedModel) -> str:
    """The file or directory name: GGUF ``general.name`` fields are often training-run labels."""
    from pathlib import Path

    return Path(loaded.source).name or loaded.config.name


def encode(source: str, prompt: str, bos: str):
    if not prompt or not prompt.strip():
        raise PromptError("The prompt is empty: type a sentence in the sidebar.")
    encoding = get_model(source).tokenizer.encode(prompt, bos=bos)
    limit = min(MAX_TOKENS, get_model(source).config.max_seq_len)
    if len(encoding.ids) > limit:
        raise PromptError(f"The prompt has {len(encoding.ids)} tokens; this page traces at most {limit} "
                          "(TXVIZ_MAX_TOKENS). Shorten it or raise the limit.")
    return encoding


@st.cache_resource(show_spinner="Running the model…", max_entries=32)
def get_trace(source: str, prompt: str, bos: str, capture: tuple[str, ...] = ("attn_probs",),
              layers: tuple[int, ...] | None = None) -> PromptTrace:
    encoding = encode(source, prompt, bos)
    started = time.perf_counter()
    tr = trace(get_model(source).model, torch.tensor(encoding.ids), capture=capture, layers=layers)
    return PromptTrace(tuple(encoding.ids), tuple(encoding.tokens), tuple(encoding.offsets),
                       tuple(encoding.special), tr, time.perf_counter() - started)


@st.cache_data(show_spinner=False, max_entries=64)
def get_head_table(source: str, prompt: str, bos: str) -> pd.DataFrame:
    traced = get_trace(source, prompt, bos)
    table = pd.DataFrame(head_table(traced.trace["attn_probs"][:, 0], traced.trace.ids[0], traced.trace.layers))
    return table


def head_metric_grid(table: pd.DataFrame, metric: str) -> np.ndarray:
    return table.pivot(index="layer", columns="head", values=metric).to_numpy()


@st.cache_resource(show_spinner="Running the induction test (random tokens, repeated)…", max_entries=8)
def get_induction_scores(source: str, length: int, seed: int) -> np.ndarray:
    from txviz.analysis.detectors import induction_scores

    loaded = get_model(source)
    tokenizer = loaded.tokenizer
    prefix = (tokenizer.sink_id,) if tokenizer is not None and tokenizer.sink_id is not None else ()
    special = tuple(getattr(tokenizer, "special_ids", ()) or ())
    return induction_scores(loaded.model, length, seed=seed, prefix=prefix, avoid=special + prefix).numpy()


TEXTS_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "assets" / "texts"


def shipped_texts() -> dict[str, str]:
    """The license-clean texts the project ships, by file name."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(TEXTS_DIR.glob("*.txt"))}


@st.cache_resource(show_spinner="Scoring the text under each RoPE scaling…", max_entries=8)
def get_scaling_losses(source: str, text_name: str, factor: float, max_tokens: int) -> dict[str, np.ndarray]:
    from txviz.analysis.positions import SCALING_KINDS, scaling_for, token_losses, variant

    loaded = get_model(source)
    ids = loaded.tokenizer.encode(shipped_texts()[text_name], bos="sink").ids[:max_tokens]
    ids = torch.tensor(ids)
    config = loaded.config
    losses = {}
    for kind in SCALING_KINDS:
        model = loaded.model if kind == "none" else variant(
            loaded.model, rope_scaling=scaling_for(kind, factor, config.max_seq_len))
        losses[kind] = token_losses(model, ids).numpy()
    return losses


@st.cache_resource(show_spinner="Shuffling the prompt…", max_entries=8)
def get_permutation_check(source: str, prompt: str, bos: str) -> dict[str, tuple]:
    from txviz.analysis.positions import layer0_score_sets, variant

    loaded = get_model(source)
    ids = torch.tensor(encode(source, prompt, bos).ids)
    models = {"with the model's positions": loaded.model, "positions removed": variant(loaded.model, positions="none")}
    return {name: layer0_score_sets(model, ids) for name, model in models.items()}


def get_generation(source: str, prompt: str, bos: str, max_new_tokens: int, use_cache: bool, chat: bool,
                   on_step=None):
    """Greedy generation from the prompt, remembered per session (it is deterministic, and a cached
    function may not draw the progress bar that ``on_step`` updates)."""
    from txviz.generate import generate

    memo = st.session_state.setdefault("_generations", {})
    key = (source, prompt, bos, max_new_tokens, use_cache, chat)
    if key in memo:
        return memo[key]

    loaded = get_model(source)
    tokenizer = loaded.tokenizer
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}]) if chat else prompt
    ids = torch.tensor(tokenizer.encode(text, bos=bos).ids)
    stop = () if tokenizer.eos_id is None else (tokenizer.eos_id,)
    result = generate(loaded.model, ids, max_new_tokens, stop_ids=stop, on_step=on_step, use_cache=use_cache)
    if len(memo) >= 8:
        memo.pop(next(iter(memo)))
    memo[key] = result
    return result


@st.cache_resource(show_spinner="Converting the KV heads and measuring the quality change…", max_entries=6)
def get_kv_counterfactual(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    """The loaded model with ``n_kv_heads`` KV heads (repeated for more, mean-pooled for fewer),
    compared with the original on a shipped text."""
    from txviz.analysis.kv_sharing import quality_vs_original, to_kv_groups, to_mha

    loaded = get_model(source)
    config = loaded.config
    if n_kv_heads == config.n_kv_heads:
        variant = loaded.model  # the original itself: the reference row, nothing converted
    elif n_kv_heads == config.n_heads:
        variant = to_mha(loaded.model)
    else:
        variant = to_kv_groups(loaded.model, n_kv_heads)
    ids = torch.tensor(loaded.tokenizer.encode(shipped_texts()[text_name], bos="sink").ids[:max_tokens])
    report = quality_vs_original(loaded.model, variant, ids)
    del variant  # the converted weights are not kept: only the numbers are
    return report


@st.cache_resource(show_spinner="Scoring every head on the built-in coreference set…", max_entries=4)
def get_coref_evaluation(source: str, bos: str) -> dict:
    from txviz.analysis.coref import builtin_cases, evaluate

    return evaluate(get_model(source), builtin_cases(), bos=bos)
