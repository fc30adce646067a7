"""Process-wide caches: one model per source (``st.cache_resource``), traces per (model, prompt, options).

Traces are immutable, so they are shared between sessions without the pickle round trip
``cache_data`` would make on every read (a full set of maps is megabytes to gigabytes), in a cache
bounded by bytes (app/byte_cache.py, TXVIZ_TRACE_CACHE_BYTES). Changing layer or head therefore never
reruns the model. Every request is checked against the limits (txviz.limits: env vars, overridden by
Streamlit secrets) before it runs; only paths inside the allowed model directories are loaded.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from app.byte_cache import ByteBudgetCache
from txviz import limits as limits_
from txviz.analysis.heads import head_table, hide_sink, metrics_table
from txviz.capture.cost import CapturePlan
from txviz.loading import load
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import confine
from txviz.loading.tokenizer import TokenizerError
from txviz.model import InputError
from txviz.capture.maps import MapStorage
from txviz.capture.trace import CaptureError, Trace, trace


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

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.trace.data.values() if isinstance(t, torch.Tensor))


def display_tokens(loaded: LoadedModel, traced: PromptTrace) -> list[str]:
    """A traced prompt's tokens as a person reads them, for a page's labels: a character that a
    byte-level BPE split over tokens ("\\xf0\\x9f" + "\\x98\\x80") shown whole on the token that ends it
    (txviz.loading.token_text). The trace keeps its own tokens: exported data does not change."""
    from txviz.loading.token_text import readable_tokens

    pieces = [loaded.tokenizer.token_bytes(i) for i in traced.ids]
    return [token.text for token in readable_tokens(pieces, traced.special, traced.tokens)]


SCALING_STORE_BYTES = 64 << 20  # per-token losses under RoPE scalings kept for every session (8 KB each at 2048 tokens)
LONG_TRACE_SECONDS = 2.0  # estimated time above which a trace shows a progress bar, layer by layer


class PromptError(ValueError):
    """A prompt the app cannot trace; the message says why and what to change."""


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
    return load(None if source == "default" else confine(source))


def display_name(loaded: LoadedModel) -> str:
    """The file or directory name: GGUF ``general.name`` fields are often training-run labels."""
    from pathlib import Path

    return Path(loaded.source).name or loaded.config.name


def encode(source: str, prompt: str, bos: str, *, n_new: int = 0, long: bool = False):
    """The prompt's encoding, or PromptError: empty, too many characters, not text, or more tokens
    (+ ``n_new`` to generate) than the model's context or the limits allow (TXVIZ_MAX_LONG_TOKENS for
    a ``long`` view, one that keeps summaries past TXVIZ_MAX_TOKENS)."""
    settings = limits()
    if not isinstance(prompt, str) or not prompt.strip():
        raise PromptError("The prompt is empty: type a sentence in the sidebar.")
    tokenizer = get_model(source).tokenizer
    if tokenizer is None:
        raise PromptError("This model has no tokenizer, so it cannot read text: pick another model.")
    try:
        limits_.check_prompt_chars(len(prompt), settings)
        encoding = tokenizer.encode(prompt, bos=bos)
        limits_.check_prompt_tokens(len(encoding.ids), get_model(source).config, settings, n_new=n_new, long=long)
    except (TokenizerError, limits_.LimitExceeded) as error:
        raise PromptError(str(error)) from None
    if not encoding.ids:
        raise PromptError("No token is left of the prompt: this model's vocabulary has none for its characters.")
    return encoding


def dropped_characters(encoding) -> str | None:
    """A note naming the characters the tokenizer had to leave out, if any."""
    if not encoding.dropped:
        return None
    shown = ", ".join(f"U+{ord(encoding.text[i]):04X}" for i in encoding.dropped[:8])
    more = f" and {len(encoding.dropped) - 8} more" if len(encoding.dropped) > 8 else ""
    return (f"{len(encoding.dropped)} character(s) have a byte this model's vocabulary has no token for and are "
            f"left out of what the model sees: {shown}{more}.")


def within_budget(estimate: limits_.Estimate) -> limits_.Estimate:
    """The estimate, or PromptError saying what it would take and which setting to change."""
    try:
        return limits_.check_budget(estimate, limits())
    except limits_.LimitExceeded as error:
        raise PromptError(str(error)) from None


def check_passes(loaded: LoadedModel, n_tokens: int, n_passes: int, what: str, *, capture: tuple[str, ...] = ("logits",)) -> None:
    """PromptError unless ``n_passes`` forward passes over ``n_tokens`` (one at a time, each keeping
    ``capture``) fit the memory budget: the fixed-size analyses (scaling losses, KV conversions, the
    induction test, the coreference set) are checked like a trace, so a small TXVIZ_MEMORY_BUDGET holds."""
    one = limits_.trace_estimate(loaded.config, max(n_tokens, 1), capture, element_bytes=loaded.dtype.itemsize,
                                 gflops=limits().gflops)
    within_budget(limits_.Estimate(what, one.bytes, one.seconds * n_passes))


@st.cache_resource(show_spinner=False)
def _trace_cache() -> ByteBudgetCache:
    return ByteBudgetCache(limits().trace_cache_bytes, size_of=lambda traced: traced.nbytes)


def get_trace(source: str, prompt: str, bos: str, capture: tuple[str, ...] = ("attn_probs",),
              layers: tuple[int, ...] | None = None, maps: MapStorage = MapStorage(), long: bool = False) -> PromptTrace:
    """The trace of a prompt, shared by every session; PromptError before running anything the limits
    refuse (too long, or an estimate above the memory budget)."""

    def compute() -> PromptTrace:
        encoding = encode(source, prompt, bos, long=long)
        loaded = get_model(source)
        estimate = within_budget(limits_.trace_estimate(loaded.config, len(encoding.ids), capture, layers=layers,
                                                        maps=maps, element_bytes=loaded.dtype.itemsize,
                                                        gflops=limits().gflops))
        what = (f"Running the model on {len(encoding.ids):,} tokens (about "
                f"{limits_.format_seconds(estimate.seconds)} at {limits().gflops:g} GFLOP/s)")
        bar = st.progress(0.0, text=f"{what}…") if estimate.seconds >= LONG_TRACE_SECONDS else None
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            bar.progress(done / total, text=f"{what}: layer {done} of {total}, "
                                            f"{time.perf_counter() - started:.0f} s so far")

        try:
            with st.spinner(f"{what}…") if bar is None else contextlib.nullcontext():
                tr = trace(loaded.model, torch.tensor(encoding.ids), capture=capture, layers=layers, maps=maps,
                           progress=progress if bar is not None else None)
        except InputError as error:  # checked above already; kept so no input reaches a page as a traceback
            raise PromptError(str(error)) from None
        finally:
            if bar is not None:
                bar.empty()
        return PromptTrace(tuple(encoding.ids), tuple(encoding.tokens), tuple(encoding.offsets),
                           tuple(encoding.special), tr, time.perf_counter() - started)

    # the limits are part of the key: a trace made under looser limits is not served under tighter ones
    key = (source, prompt, bos, tuple(capture), None if layers is None else tuple(layers), maps, long, limits())
    return _trace_cache().get(key, compute)


def attention_plan(source: str, prompt: str, bos: str) -> CapturePlan | None:
    """How the Attention page captures this prompt: None up to TXVIZ_MAX_TOKENS (every map stored, the
    trace the other pages share); longer, up to TXVIZ_MAX_LONG_TOKENS, the richest capture that fits
    the memory budget (txviz.capture.cost.choose_capture: fp32 maps, fp16 lower triangles, or every
    head's summaries with maps rebuilt from q_rot/k_rot one head at a time)."""
    from txviz.capture.cost import choose_capture

    settings = limits()
    n_tokens = len(encode(source, prompt, bos, long=True).ids)
    if n_tokens <= settings.max_prompt_tokens:
        return None
    loaded = get_model(source)
    try:
        return choose_capture(loaded.config, n_tokens, settings.memory_budget_bytes,
                              element_bytes=loaded.dtype.itemsize, weight_bytes=0)
    except CaptureError as error:
        raise PromptError(f"{error} (TXVIZ_MEMORY_BUDGET)") from None


def get_attention_trace(source: str, prompt: str, bos: str) -> tuple[PromptTrace, CapturePlan | None]:
    """The Attention page's trace and the plan it was captured with (None: the shared full-map trace)."""
    plan = attention_plan(source, prompt, bos)
    if plan is None:
        return get_trace(source, prompt, bos), None
    return get_trace(source, prompt, bos, plan.capture, plan.layers, plan.maps, long=True), plan


def get_head_table(source: str, prompt: str, bos: str) -> pd.DataFrame:
    """Every head's metrics: from the stored maps, or from the summaries a long trace keeps (equal)."""
    return _head_table(source, prompt, bos, limits())  # the limits choose the capture plan: part of the key


@st.cache_data(show_spinner=False, max_entries=64)
def _head_table(source: str, prompt: str, bos: str, settings: limits_.Limits) -> pd.DataFrame:
    traced, _ = get_attention_trace(source, prompt, bos)
    tr = traced.trace
    if "head_summaries" in tr:
        return pd.DataFrame(metrics_table(tr.head_metrics(), tr.layers))
    from txviz.analysis.detectors import unknown_token_ids

    unknown = unknown_token_ids(get_model(source).tokenizer)  # a repeated <|unk|> is not a repeated word
    return pd.DataFrame(head_table(tr["attn_probs"][:, 0], tr.ids[0], tr.layers, ignore=unknown))


def get_map_overview(source: str, prompt: str, bos: str, layer: int, head: int, hide: bool) -> tuple[np.ndarray, int]:
    """One head's map pooled to at most MAX_MAP_CELLS² cells (block max), remembered per head so that
    going back to a head of a long prompt is instant (the map itself is rebuilt, then dropped)."""
    return _map_overview(source, prompt, bos, layer, head, hide, limits())


@st.cache_data(show_spinner="Drawing the whole map…", max_entries=64)
def _map_overview(source: str, prompt: str, bos: str, layer: int, head: int, hide: bool,
                  settings: limits_.Limits) -> tuple[np.ndarray, int]:
    from app.figures.charts import pool_attention_rows

    traced, _ = get_attention_trace(source, prompt, bos)

    def rows_of(start: int, stop: int) -> np.ndarray:  # a band at a time: an 8192² map is never whole
        rows = traced.trace.attn(layer, head, rows=slice(start, stop))
        return (hide_sink(rows) if hide else rows).numpy()

    return pool_attention_rows(rows_of, traced.n_tokens, traced.n_tokens)


def head_metric_grid(table: pd.DataFrame, metric: str) -> np.ndarray:
    return table.pivot(index="layer", columns="head", values=metric).to_numpy()


def get_induction_scores(source: str, length: int, seed: int) -> np.ndarray:
    """Every head's induction score on ``length`` random tokens repeated (checked against the budget
    on every call: the cached result below does not know the limits)."""
    check_passes(get_model(source), 1 + 2 * length, 1, f"the induction test on {2 * length} tokens",
                 capture=("attn_probs",))
    return _induction_scores(source, length, seed)


@st.cache_resource(show_spinner="Running the induction test (random tokens, repeated)…", max_entries=8)
def _induction_scores(source: str, length: int, seed: int) -> np.ndarray:
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


def shipped_text_ids(loaded: LoadedModel, text_name: str, max_tokens: int) -> torch.Tensor:
    """The first ``max_tokens`` tokens of a shipped text, after the sink token when the model has one."""
    tokenizer = loaded.tokenizer
    bos = "sink" if tokenizer.sink_id is not None else "none"
    ids = tokenizer.encode(shipped_texts()[text_name], bos=bos).ids
    return torch.tensor(ids[:min(max_tokens, loaded.config.max_seq_len)])


def scaling_losses_kept(source: str, text_name: str, factor: float, max_tokens: int) -> dict[str, np.ndarray]:
    """The scalings of this text and factor already scored (by any session, a stopped run's included),
    in SCALING_KINDS order."""
    from txviz.analysis.positions import SCALING_KINDS

    store, kept = _scaling_store(), {}
    for kind in SCALING_KINDS:
        found, losses = store.peek((source, text_name, factor, max_tokens, kind))
        if found:
            kept[kind] = losses
    return kept


def score_scaling(source: str, text_name: str, factor: float, max_tokens: int, kind: str) -> np.ndarray:
    """Per-token loss of a shipped text under one RoPE scaling (budget-checked), kept for every session
    as soon as it is scored, so a run stopped between scalings keeps what it did; its time is kept as
    the measured step that later estimates use."""
    from txviz.analysis.positions import scaling_for, token_losses, variant

    def score() -> np.ndarray:
        loaded = get_model(source)
        ids = shipped_text_ids(loaded, text_name, max_tokens)
        check_passes(loaded, len(ids), 1, f"scoring {len(ids)} tokens under the {kind} scaling")
        started = time.perf_counter()
        model = loaded.model if kind == "none" else variant(
            loaded.model, rope_scaling=scaling_for(kind, factor, loaded.config.max_seq_len))
        losses = token_losses(model, ids).numpy()
        steps = _scaling_step_times().setdefault((source, len(ids)), [])
        steps[:] = steps[-4:] + [time.perf_counter() - started]
        return losses

    # one computation per key: two sessions that ask at once share it
    return _scaling_store().get((source, text_name, factor, max_tokens, kind), score)


def scaling_step_seconds(source: str, n_tokens: int) -> tuple[float, str]:
    """(seconds one scaling of ``n_tokens`` takes here, how that is known): the median of the last
    five scored on this server if any (one busy moment does not set it), else the loaded model's FLOPs
    at the speed a short forward measured."""
    steps = _scaling_step_times().get((source, n_tokens))
    if steps:
        measured = float(np.median(steps))
        return measured, f"one scaling of {n_tokens:,} tokens took {measured:.1f} s here"
    loaded, speed = get_model(source), forward_gflops(source)
    seconds = limits_.trace_estimate(loaded.config, n_tokens, ("logits",), element_bytes=loaded.dtype.itemsize,
                                     gflops=speed).seconds
    return seconds, f"a short forward of this model ran at {speed:.1f} GFLOP/s here"


@st.cache_resource(show_spinner="Timing a short forward of the model…", max_entries=4)
def forward_gflops(source: str, n_tokens: int = 64, repeats: int = 3) -> float:
    """GFLOP/s of a forward of ``n_tokens`` of a shipped text, measured once per model: the fastest of
    ``repeats`` after a warm-up (one-time setup and a busy moment on a shared machine are not counted);
    what turns a run's FLOPs into seconds on this server until a real run has been timed."""
    from txviz.analysis.positions import token_losses

    loaded = get_model(source)
    ids = shipped_text_ids(loaded, next(iter(shipped_texts())), n_tokens)
    token_losses(loaded.model, ids[:8])
    fastest = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        token_losses(loaded.model, ids)
        fastest = min(fastest, time.perf_counter() - started)
    flops = limits_.trace_estimate(loaded.config, len(ids), ("logits",), element_bytes=loaded.dtype.itemsize,
                                   gflops=1.0).seconds  # seconds at 1 GFLOP/s = GFLOPs
    return flops / max(fastest, 1e-6)


@st.cache_resource(show_spinner=False)
def _scaling_store() -> ByteBudgetCache:
    return ByteBudgetCache(SCALING_STORE_BYTES, size_of=lambda losses: losses.nbytes)


@st.cache_resource(show_spinner=False)
def _scaling_step_times() -> dict:
    return {}


@st.cache_resource(show_spinner="Shuffling the prompt…", max_entries=8)
def get_permutation_check(source: str, prompt: str, bos: str) -> dict[str, tuple]:
    from txviz.analysis.positions import layer0_score_sets, variant

    loaded = get_model(source)
    ids = torch.tensor(encode(source, prompt, bos).ids)
    models = {"with the model's positions": loaded.model, "positions removed": variant(loaded.model, positions="none")}
    return {name: layer0_score_sets(model, ids) for name, model in models.items()}


def get_coref_evaluation(source: str, bos: str) -> dict:
    """Every head scored on the built-in coreference set; budget-checked on every call."""
    from txviz.analysis.coref import builtin_cases

    loaded, cases = get_model(source), builtin_cases()
    longest = max(len(loaded.tokenizer.encode(case.text, bos=bos).ids) for case in cases)
    check_passes(loaded, longest, len(cases), f"scoring every head on {len(cases)} sentences", capture=("attn_probs",))
    return _coref_evaluation(source, bos)


@st.cache_resource(show_spinner="Scoring every head on the built-in coreference set…", max_entries=4)
def _coref_evaluation(source: str, bos: str) -> dict:
    from txviz.analysis.coref import builtin_cases, evaluate

    return evaluate(get_model(source), builtin_cases(), bos=bos)
