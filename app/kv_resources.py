"""Process-wide and per-session runs for the KV cache page: generation with and without the cache
(the growth view shared by every session, timings per session, drawn with a progress bar), the loaded
model with more or fewer KV heads, and the per-layer sharing sweep (timed first, run on request,
kept for every session). Each is checked against the limits before it runs, as traces are
(app/resources.py)."""

from __future__ import annotations

import streamlit as st
import torch

from app.resources import PromptError, check_passes, encode, get_model, limits, shipped_text_ids, within_budget
from txviz import limits as limits_
from txviz.loading.tokenizer import TokenizerError


@st.cache_resource(show_spinner=False)
def _shared_generations() -> dict:
    return {}  # (source, prompt, bos, n, use_cache, chat, stop_at_eos) → Generation, for every session


def get_generation(source: str, prompt: str, bos: str, max_new_tokens: int, use_cache: bool, chat: bool,
                   on_step=None, stop_at_eos: bool = True, shared: bool = False):
    """Greedy generation from the prompt, remembered (a cached function may not draw the progress bar
    that ``on_step`` updates): per session, or with ``shared`` for every session (greedy decoding is
    deterministic, so the cache-growth view of a prompt is computed once; timings stay per session).
    ``stop_at_eos=False`` generates exactly ``max_new_tokens`` (a timing needs the same number of steps
    whatever the model says)."""
    from txviz.generate import generate

    memo = _shared_generations() if shared else st.session_state.setdefault("_generations", {})
    key = (source, prompt, bos, max_new_tokens, use_cache, chat, stop_at_eos)
    if key in memo:
        return memo[key]

    loaded = get_model(source)
    tokenizer = loaded.tokenizer
    encode(source, prompt, bos)  # the prompt itself: empty, too long, not text
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}]) if chat else prompt
    except TokenizerError as error:
        raise PromptError(f"Cannot wrap the prompt in the chat template: {error}") from None
    encoding = encode(source, text, bos, n_new=max_new_tokens)
    within_budget(limits_.generation_estimate(loaded.config, len(encoding.ids), max_new_tokens,
                                              element_bytes=loaded.dtype.itemsize, use_cache=use_cache,
                                              gflops=limits().gflops))
    ids = torch.tensor(encoding.ids)
    stop = () if tokenizer.eos_id is None or not stop_at_eos else (tokenizer.eos_id,)
    result = generate(loaded.model, ids, max_new_tokens, stop_ids=stop, on_step=on_step, use_cache=use_cache)
    if len(memo) >= 8:
        memo.pop(next(iter(memo)), None)
    memo[key] = result
    return result


def get_kv_counterfactual(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    """The loaded model with ``n_kv_heads`` KV heads (repeated for more, mean-pooled for fewer),
    compared with the original on a shipped text; budget-checked on every call."""
    loaded = get_model(source)
    n = len(shipped_text_ids(loaded, text_name, max_tokens))
    check_passes(loaded, n, 2, f"comparing {n} tokens with {n_kv_heads} KV heads")
    return _kv_counterfactual(source, n_kv_heads, text_name, max_tokens)


@st.cache_resource(show_spinner="Converting the KV heads and measuring the quality change…", max_entries=6)
def _kv_counterfactual(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    from txviz.analysis.kv_sharing import quality_vs_original, to_kv_groups, to_mha

    loaded = get_model(source)
    config = loaded.config
    ids = shipped_text_ids(loaded, text_name, max_tokens)
    if n_kv_heads == config.n_kv_heads:
        variant = loaded.model  # the original itself: the reference row, nothing converted
    elif n_kv_heads == config.n_heads:
        variant = to_mha(loaded.model)
    else:
        variant = to_kv_groups(loaded.model, n_kv_heads)
    report = quality_vs_original(loaded.model, variant, ids)
    del variant  # the converted weights are not kept: only the numbers are
    return report


@st.cache_resource(show_spinner=False)
def _layer_sharing_results() -> dict:
    return {}  # (source, n_kv_heads, text, tokens) → LayerSharing, shared by every session


def layer_sharing_result(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    """A sweep already measured (by any session), or None."""
    return _layer_sharing_results().get((source, n_kv_heads, text_name, max_tokens))


@st.cache_resource(show_spinner="Timing one step of the sweep…", max_entries=16)
def layer_sharing_step_seconds(source: str, n_kv_heads: int, text_name: str, max_tokens: int) -> float:
    """Seconds one step of the per-layer sweep takes on this server (measured once, kept): the estimate
    shown before the sweep starts is this times ``layer_sharing_steps``."""
    from txviz.analysis.kv_sharing import time_one_layer_step

    loaded = get_model(source)
    ids = shipped_text_ids(loaded, text_name, max_tokens)
    check_passes(loaded, ids.shape[0], 1, "timing one step of the per-layer sweep")
    return time_one_layer_step(loaded.model, ids, n_kv_heads)


def get_layer_sharing(source: str, n_kv_heads: int, text_name: str, max_tokens: int, progress=None):
    """Each layer's KV heads merged alone, then the cheapest first (txviz.analysis.kv_sharing.layer_sharing),
    on a shipped text; one forward pass per layer and per point, so it is run on request, with
    ``progress``, and remembered for every session."""
    from txviz.analysis.kv_sharing import layer_sharing

    results = _layer_sharing_results()
    key = (source, n_kv_heads, text_name, max_tokens)
    if key not in results:
        loaded = get_model(source)
        ids = shipped_text_ids(loaded, text_name, max_tokens)
        check_passes(loaded, ids.shape[0], loaded.config.n_layers + 8,
                     f"merging the KV heads of each of {loaded.config.n_layers} layers")
        if len(results) >= 8:
            results.pop(next(iter(results)))
        results[key] = layer_sharing(loaded.model, ids, n_kv_heads, progress=progress)
    return results[key]
