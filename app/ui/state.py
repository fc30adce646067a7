"""The few session-state keys the app shares between pages, mirrored in the URL query params so a
view can be shared by link: prompt, model, BOS policy, layer, head, the Attention page's view
(hide-sink, colour-by, query token, the prompt-pair view and its second prompt) and the Heads page's
coreference sentence with its marks, answer and completion.

``FIELDS`` is the one table: a session key (also its query-param name), its default and how to read
it back from the URL. A page that wants a key in the link adds a ``Field`` there. A text too long
for a link (browsers and servers refuse URLs past a few KB; a 100 KB prompt made a link the server
answered with HTTP 400) goes into the URL as ``<key>_id=<hash>``, and the text itself into a small
store on this server, which forgets it when the server restarts (the page then says so).
"""

from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import quote

import streamlit as st

from app import cache
from txviz.analysis.heads.metrics import METRICS

DEFAULT_PROMPT = "The trophy didn't fit in the suitcase because it was too big."
DEFAULT_COREF = "Mary met John at the station, and she gave him a book."
BOS_POLICIES = {"sink": "prepend a document-boundary token (SmolLM2: <|endoftext|>, Gemma: <bos>) as an attention sink",
                "none": "no extra token", "bos": "prepend the model's BOS token"}


def describe_bos(bos: str, first_token: str | None) -> str:
    """The policy as it applies to this prompt: the token actually prepended, by name."""
    if bos == "none" or not first_token:
        return BOS_POLICIES["none"]
    return f"prepend {first_token} as an attention sink" if bos == "sink" else f"prepend the model's BOS, {first_token}"
MAX_URL_VALUE = 2000  # characters of one URL-encoded value; longer texts go by id


def _as_bool(raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


@dataclass(frozen=True)
class Field:
    """One URL-backed session key. ``choices``: the values it may take (others fall back to the default)."""

    default: Any
    parse: Callable[[str], Any] = str
    dump: Callable[[Any], str] = str
    choices: tuple | None = None

    def read(self, raw: str) -> Any:
        try:
            value = self.parse(raw)
        except (TypeError, ValueError):
            return self.default
        if self.choices is not None and value not in self.choices:
            return self.default
        if isinstance(value, str) and not value.strip() and self.default:
            return self.default
        return value


FIELDS: dict[str, Field] = {
    "prompt": Field(DEFAULT_PROMPT),
    "model": Field("default"),
    "bos": Field("sink", choices=tuple(BOS_POLICIES)),
    "layer": Field(0, int),
    "head": Field(0, int),
    # the Attention page's view
    "hide_sink": Field(False, _as_bool, lambda value: "1" if value else "0"),
    "grid_metric": Field("first_token_mass", choices=METRICS),
    "query": Field(-1, int),  # the head view's query token; -1: the last one, whatever the prompt's length
    "pair_open": Field(False, _as_bool, lambda value: "1" if value else "0"),  # the prompt-pair view, open
    "pair_prompt": Field(""),  # its second prompt
    # the Heads page's coreference sentence, and what the reader marked on it
    "coref_text": Field(DEFAULT_COREF),
    "coref_marks": Field(""),  # "pronoun:candidates:deciding" word indices (coref.marks); "": the suggested ones
    "coref_answer": Field(-1, int),  # the candidate the heads are ranked for, by word index; -1: the first
    "coref_completion": Field(None),  # None: the suggested completion; "" is a completion of its own
}
DEFAULTS = {key: field.default for key, field in FIELDS.items()}
URL_KEYS = tuple(FIELDS)


def _id_of(value: str) -> str:
    """A long text's id in a link: a short hash of its content."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def long_values():
    """The server's one store of texts too long for a link, by id, shared by every session (the least
    recently used go first past cache.LONG_TEXT_BYTES of memory)."""
    return cache.long_texts()


def _from_url(key: str, field: Field, params) -> Any:
    raw = params.get(key)
    if raw is not None:
        return field.read(raw)
    text_id = params.get(f"{key}_id")
    if text_id is None:
        return field.default
    found, value = long_values().peek(text_id)
    if not found:
        st.session_state["_url_note"] = (f"This link's {key} was too long for a URL and was kept on the server, "
                                         "which has restarted since: showing the default instead.")
        return field.default
    return field.read(value)


def init() -> None:
    """Fill session state from the URL on the first run of a session, else from the defaults."""
    if st.session_state.get("_initialized"):
        for key in URL_KEYS:  # keep widget-bound keys alive on pages that do not draw their widget
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
        return
    params = st.query_params
    for key, field in FIELDS.items():
        st.session_state[key] = _from_url(key, field, params)
    st.session_state["_initialized"] = True


def _set_param(name: str, text: str | None) -> None:
    if text is None:
        if name in st.query_params:
            del st.query_params[name]
    elif st.query_params.get(name) != text:
        st.query_params[name] = text


def sync_url() -> None:
    """Write the shared keys back into the URL (only those that differ from the defaults); a text too
    long for a link goes by its id in the server's store."""
    for key, field in FIELDS.items():
        value = st.session_state.get(key, field.default)
        text, text_id = None, None
        if value != field.default:
            text = field.dump(value)
            if len(quote(text, safe="")) > MAX_URL_VALUE:
                text_id = _id_of(text)
                long_values().get(text_id, lambda text=text: text)
                text = None
        _set_param(key, text)
        _set_param(f"{key}_id", text_id)


def url_note() -> str | None:
    """What the page should say about the link: a long text kept by id, or one the server forgot."""
    note = st.session_state.get("_url_note")
    long_keys = [key for key in FIELDS if f"{key}_id" in st.query_params]
    if long_keys:
        kept = " and ".join(long_keys)
        note = ((note + " ") if note else "") + (
            f"The {kept} is too long for a link ({MAX_URL_VALUE:,}+ characters): the link holds a short id and "
            "this server keeps the text until it restarts.")
    return note


def get(key: str):
    return st.session_state.get(key, DEFAULTS[key])


def put(key: str, value: Any) -> None:
    """Record what a page's widgets show under a URL key whose widget is keyed otherwise (the Heads page's
    marks are keyed by their sentence), so the link carries it."""
    st.session_state[key] = value


def reset_on_change(key: str, inputs: Any) -> None:
    """Put ``key`` back to its default when ``inputs`` (what its options come from: the prompt, the
    model) changed since the last run that called this. The first call keeps the value (from a link)."""
    marker = f"_inputs_of_{key}"
    previous = st.session_state.get(marker)
    if previous is not None and previous != inputs:
        st.session_state[key] = DEFAULTS[key]
    st.session_state[marker] = inputs


def use_prompt_as(key: str) -> None:
    """Put the sidebar's prompt into ``key`` (a button's callback: it runs before the widgets are drawn)."""
    st.session_state[key] = get("prompt")


def clamp_head(n_layers: int, n_heads: int) -> None:
    """Keep the shared layer and head inside the loaded model (a URL may say layer=-5 or head=99).
    Call before the layer/head widgets are drawn."""
    for key, count in (("layer", n_layers), ("head", n_heads)):
        st.session_state[key] = min(max(int(get(key)), 0), count - 1)


def set_head(layer: int, head: int) -> None:
    """Select a head from a click elsewhere (before the layer/head widgets are drawn)."""
    st.session_state["layer"], st.session_state["head"] = int(layer), int(head)
    sync_url()  # the app synced the URL before this page ran: keep the link to the view current


# ---- a long run with its own Stop ---------------------------------------------------------------------
@dataclass(frozen=True)
class StoppableRun:
    """A run started by a click that a Stop button (any click, or Streamlit's own Stop) ends between two
    batches. Streamlit ends a script that has a new click waiting at its next call of st.*, which the
    run's progress bar makes after every batch; ``running`` marks the session while the run is under way
    and what it has done, so the next run of the page can say where it stopped (``stopped``)."""

    name: str  # the session keys' prefix, one per kind of run

    def stopped(self) -> dict | None:
        """Where the last run of this kind stopped ({"fraction", "message", "seconds"}), once; None when it finished."""
        return st.session_state.pop(f"_{self.name}_running", None)

    @contextmanager
    def running(self, what: str, estimate_s: float | None = None) -> Iterator[Callable[[float, str], None]]:
        """A Stop button and a bar ``what: message, N s so far (about M s left)``; yields ``progress(fraction, message)``."""
        st.button("Stop", key=f"{self.name}_stop", help="Ends the run after the batch under way.")
        bar = st.progress(0.0, text=f"{what}…")
        marker, started = f"_{self.name}_running", time.perf_counter()
        st.session_state[marker] = {"fraction": 0.0, "message": "starting", "seconds": 0.0}

        def progress(fraction: float, message: str) -> None:
            seconds, fraction = time.perf_counter() - started, min(max(fraction, 0.0), 1.0)
            st.session_state[marker] = {"fraction": fraction, "message": message, "seconds": seconds}
            left = "" if estimate_s is None else f", about {max(estimate_s - seconds, 0.0):.0f} s left"
            bar.progress(fraction, text=f"{what}: {message}, {seconds:.0f} s so far{left}")

        try:
            yield progress
        except Exception:  # the run failed: nothing was stopped. A stop is Streamlit's control exception, a
            st.session_state.pop(marker, None)  # BaseException raised out of ``progress``: it leaves the marker
            bar.empty()
            raise
        st.session_state.pop(marker, None)
        bar.empty()
