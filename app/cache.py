"""Everything the app keeps between reruns, in one place: every ``st.cache_resource``/``st.cache_data``
and every store shared by every session, over the computations in app/services (which never import
Streamlit). The pages call these by name; what is not kept (a service's types, errors and plain
helpers) they import from the service itself.

Each wrapper resolves the model once (``get_model``, one per source), reads the limits once (TXVIZ_*
environment variables, overridden by Streamlit secrets) and hands both to a service. Results kept for
every session live in ``_shared(name)``: a ByteBudgetCache (bounded, locked, one computation per key),
so two sessions that ask for the same trace or sweep at once share one run. Traces are immutable, so
they are shared without the pickle round trip ``cache_data`` would make on every read (a full set of
maps is megabytes to gigabytes), in a store bounded by bytes (TXVIZ_TRACE_CACHE_BYTES): changing layer
or head never reruns the model. A result that depends on the limits has them in its key.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st
import torch

from app.progress import bar_or_spinner, message_bar
from app.services import (causal, circuit, generation, heads, kv_sharing, models, positions, prompts, run_time, texts,
                          traces, zoo)
from app.services.byte_cache import ByteBudgetCache
from app.services.causal import CausalRequest
from app.services.circuit import CircuitRequest
from app.services.traces import PromptTrace
from app.services.zoo import VALIDATION_WINDOWS
from txviz import limits as limits_
from txviz.capture.cost import CapturePlan
from txviz.capture.maps import MapStorage
from txviz.analysis.kv.kinds import kind_row
from txviz.analysis.kv.long import LongCache, measure_long_cache
from txviz.config import ModelConfig
from txviz.loading.loaded import LoadedModel

__all__ = [  # what the pages call
    # model, limits, prompt
    "get_model", "zoo_description", "limits", "encode", "within_budget", "check_passes",
    # traces and their views
    "get_trace", "attention_plan", "get_attention_trace", "get_head_table", "get_map_overview", "LONG_TRACE_SECONDS",
    # heads
    "get_induction_scores", "coref_kept", "coref_seconds", "get_coref_evaluation",
    "head_maps_blob",
    # the real models side by side
    "long_cache", "kind_rows",
    # which heads cause the answer
    "causal_estimate", "causal_kept", "get_causal_report",
    # the circuit between heads
    "circuit_estimate", "circuit_kept", "get_circuit", "circuit_faithfulness", "circuit_qk",
    # positions
    "scaling_losses_kept", "score_scaling", "scaling_step_seconds",
    "forward_speed", "get_permutation_check", "SCALING_STORE_BYTES",
    # KV cache
    "get_generation", "get_kv_counterfactual", "layer_sharing_result", "layer_sharing_step_seconds",
    "get_layer_sharing",
    # the zoo and the measurements kept once run
    "zoo_model", "validation_windows", "zoo_routing", "zoo_text_trace", "zoo_window_losses", "measured", "measure",
    # texts too long for a link (app/ui/state.py)
    "long_texts", "LONG_TEXT_BYTES",
]

SCALING_STORE_BYTES = 64 << 20  # per-token losses under RoPE scalings kept for every session (8 KB each at 2048 tokens)
LONG_TRACE_SECONDS = 2.0  # estimated time above which a trace shows a progress bar, layer by layer


LONG_TEXT_BYTES = 32 << 20  # what the server keeps of texts too long for a link, all sessions together


def _text_bytes(text: str) -> int:
    """The memory a kept text takes: Python stores one to four bytes per character (four as soon as one
    character is outside the Basic Multilingual Plane), so a count of characters under-counts up to 4×."""
    return sys.getsizeof(text)


def _one(_value) -> int:
    return 1  # a store of small results counts entries: its budget is a number of entries


# name → (budget, size of one result): every result kept for every session
SHARED_STORES: dict[str, tuple[Callable[[], int], Callable[[object], int]]] = {
    "traces": (lambda: limits().trace_cache_bytes, lambda traced: traced.nbytes),
    "scaling_losses": (lambda: SCALING_STORE_BYTES, lambda losses: losses.nbytes),
    "scaling_step_times": (lambda: 64, _one),  # (source, tokens) → the last five scoring times
    "generations": (lambda: 8, _one),  # greedy, so deterministic: the cache-growth view of a prompt
    "layer_sharing": (lambda: 8, _one),
    "measurements": (lambda: 64, _one),  # the tradeoffs page's runs on this machine
    "long_texts": (lambda: LONG_TEXT_BYTES, _text_bytes),  # link values too long for a URL, by id (app/ui/state.py)
    "coref": (lambda: 8, _one),  # the built-in set scored: a (layers × heads) table per model and BOS policy
    "circuits": (lambda: 4, _one),  # circuit runs: both runs' node outputs and every edge's score, tens of MB each
    "circuit_points": (lambda: 512, _one),  # the measured faithfulness of one top-n circuit of a kept run
    "causal": (lambda: 16, _one),  # the Heads page's causal reports: grids of a few thousand numbers each
    "run_ratios": (lambda: 16, _one),  # (kind, model) → the last runs' time against their passes timed alone
}


@st.cache_resource(show_spinner=False)
def _shared(name: str) -> ByteBudgetCache:
    """The process-wide store ``name`` of SHARED_STORES."""
    budget, size_of = SHARED_STORES[name]
    return ByteBudgetCache(budget(), size_of=size_of)


def long_texts() -> ByteBudgetCache:
    """Texts too long for a link, by id, shared by every session (app/ui/state.py reads and writes them)."""
    return _shared("long_texts")


# ---- model, limits, prompt --------------------------------------------------------------------------
def _secrets() -> dict:
    """Streamlit secrets (``.streamlit/secrets.toml``), or nothing when there are none."""
    try:
        return {key: st.secrets[key] for key in st.secrets if str(key).startswith("TXVIZ_")}
    except Exception:  # no secrets file: Streamlit raises on first access
        return {}


def limits() -> limits_.Limits:
    """The limits in force: TXVIZ_* environment variables, overridden by the same names in secrets."""
    return limits_.Limits.from_env().with_overrides(_secrets())


@st.cache_resource(show_spinner=False, max_entries=2)
def get_model(source: str) -> LoadedModel:
    """The default model, or a path confined to the allowed model directories (whatever the URL says)."""
    return models.load_model(source)


@st.cache_resource(show_spinner=False, max_entries=256)
def zoo_description(path: str, version: int) -> str:
    """A zoo directory's description in the sidebar's model picker, once per ``version`` of its
    config.json (app/services/models.py)."""
    return models.describe_zoo(path)


def encode(source: str, prompt: str, bos: str, *, n_new: int = 0, long: bool = False):
    """The prompt's encoding under the limits in force, or PromptError (app/services/prompts.py)."""
    return prompts.encode(get_model(source), prompt, bos, limits(), n_new=n_new, long=long)


def within_budget(estimate: limits_.Estimate) -> limits_.Estimate:
    return prompts.within_budget(estimate, limits())


def check_passes(loaded: LoadedModel, n_tokens: int, n_passes: int, what: str, *,
                 capture: tuple[str, ...] = ("logits",)) -> None:
    prompts.check_passes(loaded, n_tokens, n_passes, what, limits(), capture=capture)


# ---- traces -----------------------------------------------------------------------------------------
def get_trace(source: str, prompt: str, bos: str, capture: tuple[str, ...] = ("attn_probs",),
              layers: tuple[int, ...] | None = None, maps: MapStorage = MapStorage(), long: bool = False) -> PromptTrace:
    """The trace of a prompt, shared by every session; PromptError before running anything the limits
    refuse (too long, or an estimate above the memory budget)."""
    request = traces.TraceRequest(tuple(capture), None if layers is None else tuple(layers), maps, long)
    return _trace(get_model(source), source, limits(), prompt, bos, request)


def _trace(loaded: LoadedModel, source: str, settings: limits_.Limits, prompt: str, bos: str,
           request: traces.TraceRequest) -> PromptTrace:
    def compute() -> PromptTrace:
        encoding, estimate = traces.check_trace(loaded, prompt, bos, request, settings)
        what = traces.describe_run(len(encoding.ids), estimate, settings)
        with bar_or_spinner(what, estimate.seconds >= LONG_TRACE_SECONDS) as report:
            return traces.run_trace(loaded, encoding, request, report)

    # the limits are part of the key: a trace made under looser limits is not served under tighter ones
    key = (source, prompt, bos, request.capture, request.layers, request.maps, request.long, settings)
    return _shared("traces").get(key, compute)


def attention_plan(source: str, prompt: str, bos: str) -> CapturePlan | None:
    """How the Attention page captures this prompt (app/services/traces.attention_plan)."""
    return _attention_plan(get_model(source), limits(), prompt, bos)


def _attention_plan(loaded: LoadedModel, settings: limits_.Limits, prompt: str, bos: str) -> CapturePlan | None:
    n_tokens = len(prompts.encode(loaded, prompt, bos, settings, long=True).ids)
    return traces.attention_plan(loaded, n_tokens, settings)


def get_attention_trace(source: str, prompt: str, bos: str) -> tuple[PromptTrace, CapturePlan | None]:
    """The Attention page's trace and the plan it was captured with (None: the shared full-map trace)."""
    return _attention_trace(get_model(source), source, limits(), prompt, bos)


def _attention_trace(loaded: LoadedModel, source: str, settings: limits_.Limits, prompt: str, bos: str):
    plan = _attention_plan(loaded, settings, prompt, bos)
    return _trace(loaded, source, settings, prompt, bos, traces.plan_request(plan)), plan


def get_head_table(source: str, prompt: str, bos: str) -> pd.DataFrame:
    """Every head's metrics: from the stored maps, or from the summaries a long trace keeps (equal)."""
    return _head_table(get_model(source), source, prompt, bos, limits())  # the limits choose the capture plan


@st.cache_data(show_spinner=False, max_entries=64)
def _head_table(_loaded: LoadedModel, source: str, prompt: str, bos: str, settings: limits_.Limits) -> pd.DataFrame:
    traced, _ = _attention_trace(_loaded, source, settings, prompt, bos)
    return traces.head_table(_loaded, traced)


def get_map_overview(source: str, prompt: str, bos: str, layer: int, head: int, hide: bool) -> tuple[np.ndarray, int]:
    """One head's map pooled to at most MAX_MAP_CELLS² cells, remembered per head so that going back to
    a head of a long prompt is instant (the map itself is rebuilt, then dropped)."""
    return _map_overview(get_model(source), source, prompt, bos, layer, head, hide, limits())


@st.cache_data(show_spinner="Drawing the whole map…", max_entries=64)
def _map_overview(_loaded: LoadedModel, source: str, prompt: str, bos: str, layer: int, head: int, hide: bool,
                  settings: limits_.Limits) -> tuple[np.ndarray, int]:
    traced, _ = _attention_trace(_loaded, source, settings, prompt, bos)
    return traces.map_overview(traced, layer, head, hide)


# ---- heads ------------------------------------------------------------------------------------------
def get_induction_scores(source: str, length: int, seed: int) -> np.ndarray:
    """Every head's induction score on ``length`` random tokens repeated (checked against the budget
    on every call: the cached result below does not know the limits)."""
    loaded = get_model(source)
    heads.check_induction(loaded, length, limits())
    return _induction_scores(loaded, source, length, seed)


@st.cache_resource(show_spinner="Running the induction test (random tokens, repeated)…", max_entries=8)
def _induction_scores(_loaded: LoadedModel, source: str, length: int, seed: int) -> np.ndarray:
    return heads.induction_scores(_loaded, length, seed)


def coref_kept(source: str, bos: str) -> dict | None:
    """Every head scored on the built-in set, if any session has run it for this model and BOS policy, else None."""
    return _shared("coref").peek((source, bos))[1]


def coref_seconds(source: str, bos: str) -> float:
    """How long scoring the built-in set takes here now (app/services/run_time.py)."""
    loaded = get_model(source)
    return _run_seconds("coref", source, _coref_longest(loaded, source, bos), heads.coref_passes())


def get_coref_evaluation(source: str, bos: str, progress=None) -> dict:
    """Every head scored on the built-in coreference set (budget-checked first), once for every session,
    ``progress(fraction, message)`` drawing the caller's bar after each batch."""
    loaded = get_model(source)
    longest = _coref_longest(loaded, source, bos)
    heads.check_coref(loaded, bos, limits(), longest=longest)
    return _shared("coref").get((source, bos), _timed("coref", source, longest, heads.coref_passes(),
                                                      lambda: heads.coref_evaluation(loaded, bos, progress)))


@st.cache_resource(show_spinner=False, max_entries=8)
def _coref_longest(_loaded: LoadedModel, source: str, bos: str) -> int:
    """The built-in set's longest sentence in tokens: tokenized once per model and policy, not on every rerun."""
    return heads.coref_longest(_loaded, bos)


# ---- how long a run takes here, now -------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=16, ttl=60)
def _unit_seconds(_loaded: LoadedModel, source: str, kind: str, n_tokens: int) -> float:
    """A pass inside one batch of the run's own work unit (app/services/run_time.py), timed at most once a
    minute per model, kind and length: it follows the machine's load without a timing on every rerun."""
    return run_time.unit_seconds(_loaded, n_tokens, run_time.RUN_UNITS[kind])


def _run_seconds(kind: str, source: str, n_tokens: int, passes: float) -> float:
    ratio = run_time.ratio(_shared("run_ratios").peek((kind, source))[1], kind)
    loaded = get_model(source)
    # a pass is timed on at most the model's context: a longer one cannot run (the built-in coreference
    # set's longest sentence outgrows a small checkpoint's context; each sentence runs up to its pronoun only)
    return passes * _unit_seconds(loaded, source, kind, min(n_tokens, loaded.config.max_seq_len)) * ratio


def _timed(kind: str, source: str, n_tokens: int, passes: float, compute: Callable[[], object]) -> Callable[[], object]:
    """``compute`` that, once it has finished, keeps its time against its passes timed in its unit for later estimates."""
    def run():
        one_pass = _unit_seconds(get_model(source), source, kind, n_tokens)
        started = time.perf_counter()
        result = compute()
        seconds = time.perf_counter() - started
        _shared("run_ratios").update((kind, source), lambda kept: run_time.kept_ratios(kept, seconds, passes, one_pass))
        return result

    return run


# ---- which heads cause the answer -----------------------------------------------------------------------
def causal_estimate(source: str, request: CausalRequest) -> limits_.Estimate:
    """What the causal run of ``request`` would take, its time measured here now (app/services/run_time.py),
    or PromptError (unequal token lengths, a word the vocabulary lacks, a budget too small) saying what to change."""
    loaded, settings = get_model(source), limits()
    clean, corrupt, _ = causal.prepare(loaded, request, settings)
    checked = causal.estimate(loaded, clean.ids, corrupt.ids, settings)  # the limits hold the counted work
    seconds = _run_seconds("causal", source, len(clean.ids), causal.passes(loaded, clean.ids, corrupt.ids))
    return dataclasses.replace(checked, seconds=seconds)


def causal_kept(source: str, request: CausalRequest) -> dict | None:
    """The report of ``request`` if any session has run it under the limits in force, else None."""
    return _shared("causal").peek((source, request, limits()))[1]


def get_causal_report(source: str, request: CausalRequest, progress=None) -> dict:
    """Run (once for every session, keyed by model, texts, words and limits) the causal report,
    ``progress(fraction, message)`` drawing the caller's bar after each step and batch."""
    loaded, settings = get_model(source), limits()
    clean, corrupt, _ = causal.prepare(loaded, request, settings)
    compute = _timed("causal", source, len(clean.ids), causal.passes(loaded, clean.ids, corrupt.ids),
                     lambda: causal.run(loaded, request, settings, progress))
    return _shared("causal").get((source, request, settings), compute)


# ---- the circuit between heads ----------------------------------------------------------------------
def circuit_estimate(source: str, request: CircuitRequest) -> limits_.Estimate:
    """What the circuit run of ``request`` would take, its time measured here now (app/services/run_time.py),
    or PromptError saying what to change."""
    loaded, settings = get_model(source), limits()
    checked = circuit.estimate(loaded, request, settings)  # the limits hold the counted work
    n_tokens, passes = circuit.work(loaded, request, settings)
    return dataclasses.replace(checked, seconds=_run_seconds("circuit", source, n_tokens, passes))


def circuit_kept(source: str, request: CircuitRequest):
    """The circuit run of ``request`` if any session has made it under the limits in force, else None."""
    return _shared("circuits").peek((source, request, limits()))[1]


def get_circuit(source: str, request: CircuitRequest, progress=None):
    """Run (once for every session, keyed by model, texts, words, steps and limits) the circuit of
    ``request``, ``progress(done, total)`` after each batched call."""
    loaded, settings = get_model(source), limits()
    n_tokens, passes = circuit.work(loaded, request, settings)
    compute = _timed("circuit", source, n_tokens, passes, lambda: circuit.run(loaded, request, settings, progress))
    return _shared("circuits").get((source, request, settings), compute)


def circuit_faithfulness(source: str, request: CircuitRequest, n_edges: int) -> float | None:
    """The measured faithfulness of the top ``n_edges`` circuit of the kept run (None: no run kept)."""
    kept = circuit_kept(source, request)
    if kept is None:
        return None
    return _shared("circuit_points").get((source, request, limits(), n_edges),
                                         lambda: circuit.measured_faithfulness(kept, n_edges))


def circuit_qk(source: str, request: CircuitRequest, layer: int, head: int, query: int, key: int):
    """The query–key breakdown of one score on the kept run's clean prompt (None: no run kept), or PromptError."""
    kept = circuit_kept(source, request)
    return None if kept is None else circuit.breakdown(get_model(source), kept, layer, head, query, key)


# ---- positions --------------------------------------------------------------------------------------
def scaling_losses_kept(source: str, text_name: str, factor: float, max_tokens: int) -> dict[str, np.ndarray]:
    """The scalings of this text and factor already scored (by any session, a stopped run's included),
    in SCALING_KINDS order."""
    from txviz.analysis.positions.measured import SCALING_KINDS

    store, kept = _shared("scaling_losses"), {}
    for kind in SCALING_KINDS:
        found, losses = store.peek((source, text_name, factor, max_tokens, kind))
        if found:
            kept[kind] = losses
    return kept


def score_scaling(source: str, text_name: str, factor: float, max_tokens: int, kind: str) -> np.ndarray:
    """Per-token loss of a shipped text under one RoPE scaling (budget-checked), kept for every session
    as soon as it is scored, so a run stopped between scalings keeps what it did; its time is kept as
    the measured step that later estimates use."""
    loaded, settings = get_model(source), limits()

    def score() -> np.ndarray:
        ids = texts.shipped_text_ids(loaded, text_name, max_tokens)
        prompts.check_passes(loaded, len(ids), 1, f"scoring {len(ids)} tokens under the {kind} scaling", settings)
        losses, seconds = positions.scaling_losses(loaded, ids, kind, factor)
        _shared("scaling_step_times").update((source, len(ids)), lambda steps: (steps or ())[-4:] + (seconds,))
        return losses

    return _shared("scaling_losses").get((source, text_name, factor, max_tokens, kind), score)


def scaling_step_seconds(source: str, n_tokens: int) -> tuple[float, str]:
    """(seconds one scaling of ``n_tokens`` takes here, how that is known): the median of the last
    five scored on this server if any (one busy moment does not set it), else the loaded model's FLOPs
    at the speed a short forward measured."""
    found, steps = _shared("scaling_step_times").peek((source, n_tokens))
    if found:
        measured = float(np.median(steps))
        return measured, f"one scaling of {n_tokens:,} tokens took {measured:.1f} s here"
    loaded, speed = get_model(source), forward_speed(source)
    return (positions.scaling_seconds(loaded, n_tokens, speed),
            f"a short forward of this model ran at {speed.gflops:.1f} GFLOP/s here"
            + (f", plus {speed.fixed_seconds:.2f} s a pass whatever its length" if speed.fixed_seconds else ""))


@st.cache_resource(show_spinner="Timing two short forwards of the model…", max_entries=4)
def forward_speed(source: str):
    """A fixed cost per pass and a rate, measured once per model: what turns a run's FLOPs into
    seconds on this server until a real run has been timed."""
    return positions.forward_speed(get_model(source))


@st.cache_resource(show_spinner="Shuffling the prompt…", max_entries=8)
def get_permutation_check(source: str, prompt: str, bos: str) -> dict[str, tuple]:
    loaded = get_model(source)
    ids = torch.tensor(prompts.encode(loaded, prompt, bos, limits()).ids)
    return positions.permutation_check(loaded, ids)


# ---- KV cache ---------------------------------------------------------------------------------------
def get_generation(source: str, prompt: str, bos: str, max_new_tokens: int, use_cache: bool, chat: bool,
                   on_step=None, stop_at_eos: bool = True, shared: bool = False):
    """Greedy generation from the prompt, remembered per session, or with ``shared`` for every session
    (greedy decoding is deterministic, so the cache-growth view of a prompt is computed once; timings
    stay per session). ``on_step`` draws the caller's progress bar."""
    key = (source, prompt, bos, max_new_tokens, use_cache, chat, stop_at_eos)

    def compute():
        return generation.generate_from_prompt(get_model(source), prompt, bos, limits(), max_new_tokens,
                                               use_cache, chat, on_step=on_step, stop_at_eos=stop_at_eos)

    if shared:
        return _shared("generations").get(key, compute)
    memo = st.session_state.setdefault("_generations", {})  # this session's timings
    if key not in memo:
        result = compute()
        if len(memo) >= 8:
            memo.pop(next(iter(memo)), None)
        memo[key] = result
    return memo[key]


def get_kv_counterfactual(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    """The loaded model with ``n_kv_heads`` KV heads compared with the original on a shipped text;
    budget-checked on every call."""
    loaded = get_model(source)
    n_tokens = len(texts.shipped_text_ids(loaded, text_name, max_tokens))
    kv_sharing.check_kv_counterfactual(loaded, n_kv_heads, n_tokens, limits())
    return _kv_counterfactual(loaded, source, n_kv_heads, text_name, max_tokens)


@st.cache_resource(show_spinner="Converting the KV heads and measuring the quality change…", max_entries=6)
def _kv_counterfactual(_loaded: LoadedModel, source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    return kv_sharing.kv_counterfactual(_loaded, n_kv_heads, texts.shipped_text_ids(_loaded, text_name, max_tokens))


def layer_sharing_result(source: str, n_kv_heads: int, text_name: str, max_tokens: int):
    """A sweep already measured (by any session), or None."""
    return _shared("layer_sharing").peek((source, n_kv_heads, text_name, max_tokens))[1]


@st.cache_resource(show_spinner="Timing one step of the sweep…", max_entries=16)
def layer_sharing_step_seconds(source: str, n_kv_heads: int, text_name: str, max_tokens: int) -> tuple[float, float]:
    """Seconds of the per-layer sweep's longest and shortest step on this server (measured once, kept): the
    estimate shown before the sweep starts is ``sweep_seconds`` of the two."""
    loaded = get_model(source)
    ids = texts.shipped_text_ids(loaded, text_name, max_tokens)
    return kv_sharing.layer_sharing_step_seconds(loaded, n_kv_heads, ids, limits())


def get_layer_sharing(source: str, n_kv_heads: int, text_name: str, max_tokens: int, progress=None):
    """The per-layer sharing sweep on a shipped text, run on request with ``progress(done, total)`` and
    remembered for every session."""
    loaded, settings = get_model(source), limits()

    def compute():
        ids = texts.shipped_text_ids(loaded, text_name, max_tokens)
        return kv_sharing.layer_sharing(loaded, n_kv_heads, ids, settings, progress=progress)

    return _shared("layer_sharing").get((source, n_kv_heads, text_name, max_tokens), compute)


# ---- the zoo ----------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=12)
def zoo_model(name: str) -> LoadedModel:
    return zoo.load_zoo_model(name)


@st.cache_resource(show_spinner=False, max_entries=4)
def validation_windows(name: str, n_windows: int = VALIDATION_WINDOWS) -> torch.Tensor:
    """(W, T) windows of the lab's held-out stories in the variant's own tokens (app/services/zoo.py)."""
    return zoo.validation_windows(zoo_model(name), n_windows)


@st.cache_resource(show_spinner="Routing held-out stories through the zoo model…", max_entries=8)
def zoo_routing(name: str, n_windows: int = VALIDATION_WINDOWS):
    return zoo.routing(zoo_model(name), validation_windows(name, n_windows))


@st.cache_resource(show_spinner=False, max_entries=32)
def zoo_text_trace(name: str, text: str):
    """(tokens, router trace) of ``text`` under a zoo variant, cut to its context."""
    return zoo.text_trace(zoo_model(name), text)


@st.cache_resource(show_spinner="Scoring the held-out stories window by window…", max_entries=16)
def zoo_window_losses(name: str) -> torch.Tensor:
    """(W,) per-window held-out losses: kept in eval.json by the lab; scored here if absent."""
    stored = zoo.stored_window_losses(name)
    return stored if stored is not None else zoo.window_losses(zoo_model(name))


# ---- measurements kept once run ---------------------------------------------------------------------
def measured(key: tuple):
    """A measurement already run (by any session), or None."""
    return _shared("measurements").peek(key)[1]


def measure(key: tuple, run: Callable[[Callable[[float, str], None]], object], label: str):
    """Run ``run(progress)`` under a progress bar and keep its result for every session."""
    def compute():
        with message_bar(label) as report:
            return run(report)

    return _shared("measurements").get(key, compute)


# ---- the real models side by side -----------------------------------------------------------------------
@st.cache_data(show_spinner="Filling the real caches…", max_entries=16)
def long_cache(config: ModelConfig, n_tokens: int) -> LongCache:
    """A KVCache of ``config``'s shape filled to ``n_tokens`` and read back after every chunk."""
    return measure_long_cache(config, n_tokens, chunk=max(64, n_tokens // 32), dtype=torch.float32)


@st.cache_data(show_spinner=False, max_entries=8)
def kind_rows(fetched: tuple, zoo: tuple, long_tokens: int) -> list[dict]:
    """One row per pretrained model (name, config) and zoo variant (name, config, validation loss)."""
    rows = [kind_row(name, "pretrained", config, long_tokens=long_tokens) for name, config in fetched]
    rows += [kind_row(f"zoo: {name}", "trained here (tiny)", config, long_tokens=long_tokens, val_loss=loss)
             for name, config, loss in zoo]
    return rows


@st.cache_data(show_spinner=False, max_entries=40)
def head_maps_blob(_build: Callable[[], bytes], prompt_id: str, layers: tuple[int, ...]) -> bytes:
    """The Attention page's head maps blob (app/components/head_maps/payload.py), built once per prompt id (model,
    prompt, sink, hide) and layers: the same bytes on every rerun, which Streamlit then sends as a
    reference to the browser's copy. 40 entries: every layer of a long prompt (30 on SmolLM2) and more."""
    return _build()
