"""The few session-state keys the app shares between pages, mirrored in the URL query params so a
view can be shared by link: prompt, model, BOS policy, layer, head, the Attention page's view
(hide-sink, colour-by, query token, the prompt-pair view and its second prompt) and the Heads page's
coreference sentence with its marks, answer and completion.

``FIELDS`` is the one table: a session key (also its query-param name), its default and how to read
it back from the URL. A page that wants a key in the link adds a ``Field`` there. A text too long
for a link (browsers and servers refuse URLs past a few KB; a 100 KB prompt made a link the server
answered with HTTP 400) goes into the URL as ``<key>_id=<hash>``, and the text itself into a small
store on this server, which forgets it when the server restarts (the page then says so).

Every other read or write of session state goes through this module too: ``PRIVATE`` lists the keys the
app keeps for itself (not a widget's, not in the URL), and four rules are written here once: ``follow``
(a widget starts again when what its options come from changes), ``keep`` (a closed tab's values are
kept), ``lazy_tabs`` (only the open tab runs) and ``StoppableRun`` (a long run a click stops; ``held``: one
that returns what it made).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import quote

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from app import cache
from app.services import run_time
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


def _finite(raw: str) -> float:
    """A number a link may carry: "nan" and "inf" parse as floats but are no setting (a clamp turned a nan
    temperature into the slider's low end)."""
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


# The largest whole number a browser's number box holds exactly (JavaScript's Number.MAX_SAFE_INTEGER):
# past it 99999999999999999999 shows as 18446744073709552000 and the box sends back something else.
# torch.Generator.manual_seed takes 0 to 2**64 - 1 (a negative seed wraps around to one of those), so the
# seeds a link may carry are the box's: 0 to this.
MAX_EXACT_INT = 2 ** 53 - 1


def _whole(low: int, high: int = MAX_EXACT_INT) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high`` (others are no setting: the field falls back to its default)."""
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(raw)
        return value
    return parse


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
    # the Decoding page's generation settings
    "dec_new": Field(48, int),  # new tokens
    "dec_chat": Field(True, _as_bool, lambda value: "1" if value else "0"),  # wrapped in the chat template, where one is
    "dec_sampler": Field("greedy", choices=("greedy", "sample")),
    "dec_temp": Field(1.0, _finite),
    "dec_top_k": Field(0, _whole(0)),  # 0: no top-k cut; a negative k is no setting (the sampler refuses it)
    "dec_top_p": Field(1.0, _finite),  # 1: no top-p cut
    "dec_seed": Field(0, _whole(0)),
}
DEFAULTS = {key: field.default for key, field in FIELDS.items()}
URL_KEYS = tuple(FIELDS)

# The keys the app keeps for itself: neither a widget's value nor in the URL. Each starts with "_"; the
# families end in the name of what they serve.
PRIVATE: dict[str, str] = {
    "_initialized": "the session's keys were filled from the URL (or the defaults) once",
    "_url_note": "what the page says about a link whose long text this server has forgotten",
    "_head_maps_wanted": "(prompt, layer, head, layer): the layer the head-maps component asked for, and the view it asked under",
    "_causal_last_run": "the causal test's last request run in this session: says when the inputs moved on from it",
    "_kv_speed_measured": "the cached vs uncached timing, with the (model, prompt, BOS, tokens) it was made on",
    "_generations": "this session's generation timings (app.cache, which this module imports: it reads the key itself)",
    "_hub_typed": "the Hub id last typed in the sidebar: asked once per text typed, whatever the answer",
    "_circuit_clicked": "(run key, (layer, head)): the Circuit graph's last clicked head, applied once per click",
    "_decodings": "the Decoding page's runs in this session, by the inputs they were generated from",
    "_decoding_branches": "the Decoding page's branches in this session, by (inputs, step, token)",
    "_decoding_branch_asked": "(inputs, run ids, step, token): the branch a candidate's click asked for, streamed by the page body",
    "_decoding_uncached": "the Decoding page's steps timed without the cache, by (inputs, step)",
    "_decoding_steps_blob": "((run id, layers), bytes): the Decoding page's step viewer's records of the run shown",
    "_decoding_branch_click": "(inputs, run ids, step, token): a candidate's bar clicked in the step viewer",
    "_sample_index": "which of the zoo's sample sentences the sidebar offers next for a prompt the vocabulary lacks",
}
PRIVATE_FAMILIES: dict[str, str] = {
    "_follows_": "+ a widget key: the inputs its value was chosen under (follow)",
    "_running_": "+ a run's name: where a stoppable run is, while it runs; still there after a Stop (StoppableRun)",
    "_holding_": "+ a run's name: (what a held run runs on, an event set when it has ended) (StoppableRun.held)",
}
_UNSET = object()


def _checked(key: str) -> str:
    """``key``, unless it is a private key missing from the table (a typo, or one nobody listed)."""
    if key.startswith("_") and key not in PRIVATE and not key.startswith(tuple(PRIVATE_FAMILIES)):
        raise KeyError(f"{key!r} is not in state.PRIVATE")
    return key


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
        put("_url_note", (f"This link's {key} was too long for a URL and was kept on the server, "
                          "which has restarted since: showing the default instead."))
        return field.default
    return field.read(value)


def init() -> None:
    """Fill session state from the URL on the first run of a session, else from the defaults."""
    if get("_initialized", False):
        keep({key: get(key) for key in URL_KEYS if has(key)})  # alive on pages that do not draw their widget
        return
    params = st.query_params
    for key, field in FIELDS.items():
        put(key, _from_url(key, field, params))
    put("_initialized", True)


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
        value = get(key)
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
    note = get("_url_note", None)
    long_keys = [key for key in FIELDS if f"{key}_id" in st.query_params]
    if long_keys:
        kept = " and ".join(long_keys)
        note = ((note + " ") if note else "") + (
            f"The {kept} is too long for a link ({MAX_URL_VALUE:,}+ characters): the link holds a short id and "
            "this server keeps the text until it restarts.")
    return note


def get(key: str, default: Any = _UNSET):
    """The value under ``key``, else ``default``; unless told, a URL key's default in ``FIELDS``, any other's None."""
    return st.session_state.get(_checked(key), DEFAULTS.get(key) if default is _UNSET else default)


def has(key: str) -> bool:
    return _checked(key) in st.session_state


def put(key: str, value: Any) -> None:
    """Set ``key``: a widget's value before the widget is drawn (or in a callback), a private key, or a
    URL key whose widget is keyed otherwise (the Heads page's marks are keyed by their sentence), so
    that the link carries it."""
    st.session_state[_checked(key)] = value


def pop(key: str, default: Any = None) -> Any:
    return st.session_state.pop(_checked(key), default)


def keys() -> list[str]:
    return list(st.session_state)


def forget(keys: Iterable[str]) -> None:
    for key in keys:
        st.session_state.pop(_checked(key), None)


def keep(defaults: Mapping[str, Any]) -> None:
    """Fill each key once with its default and keep it while no widget of it is drawn: a closed tab's
    widgets are not drawn, and Streamlit forgets the value of a widget a run does not draw. Draw these
    widgets without a default: the value is here."""
    for key, default in defaults.items():
        put(key, get(key, default))


def follow(keys: str | tuple[str, ...], inputs: Any, start: Mapping[str, Any] | None = None) -> None:
    """Widgets whose options come from ``inputs`` (the model, the prompt's tokens) start again when
    those change since the last run that called this, instead of keeping a value that now means
    something else; call before drawing them. A key without a value starts again too. Starting again
    is ``start[key]``, else a URL key's default, else no value (the widget's own default). The first call
    starts every key again but the URL keys, which keep what a link gave them."""
    keys, start = ((keys,) if isinstance(keys, str) else tuple(keys)), start or {}
    marker = f"_follows_{keys[0]}"
    first = not has(marker)
    moved = first or get(marker, None) != inputs
    for key in keys:
        if (moved and not (first and key in DEFAULTS)) or get(key, None) is None:
            if key in start or key in DEFAULTS:
                put(key, start[key] if key in start else DEFAULTS[key])
            else:
                pop(key)
    put(marker, inputs)


def within(key: str, low: int, high: int) -> None:
    """Bring a kept slider value inside the range this run draws it with (the limits or the model may
    have narrowed it since it was set); call before drawing it."""
    put(key, min(max(get(key, low), low), high))


def lazy_tabs(key: str, tabs: Mapping[str, Callable[[], Any]]) -> None:
    """Tabs of which only the open one is drawn (``tabs``: its label → what draws it): a click on
    another reruns the page, which draws that one. ``key`` keeps the open tab, and opens one when set."""
    for tab, draw in zip(st.tabs(list(tabs), key=key, on_change="rerun"), tabs.values()):
        with tab:
            if tab.open is not False:  # None: state tracking off (never here)
                draw()


def use_prompt_as(key: str) -> None:
    """Put the sidebar's prompt into ``key`` (a button's callback: it runs before the widgets are drawn)."""
    put(key, get("prompt"))


def clamp_head(n_layers: int, n_heads: int) -> None:
    """Keep the shared layer and head inside the loaded model (a URL may say layer=-5 or head=99).
    Call before the layer/head widgets are drawn."""
    for key, count in (("layer", n_layers), ("head", n_heads)):
        put(key, min(max(int(get(key)), 0), count - 1))


def set_head(layer: int, head: int) -> None:
    """Select a head from a click elsewhere (before the layer/head widgets are drawn)."""
    put("layer", int(layer))
    put("head", int(head))
    sync_url()  # the app synced the URL before this page ran: keep the link to the view current


# ---- a long run with its own Stop ---------------------------------------------------------------------
@dataclass(frozen=True)
class StoppableRun:
    """A run started by a click that a Stop button (any click, or Streamlit's own Stop) ends between two
    steps. Streamlit ends a script that has a new click waiting at its next call of st.*, which the
    run's progress bar makes after every step; while the run is under way the session keeps a mark of
    where it is (``_running_<name>``), still there on the next run of the page when a click ended it, so
    that the page can say where it stopped (``stopped``)."""

    name: str  # one per kind of run: its Stop button is keyed ``<name>_stop``
    stop_help: str = "Ends the run after the batch under way."

    @property
    def _marker(self) -> str:
        return f"_running_{self.name}"

    def stopped(self) -> Any:
        """The mark the last run of this kind left when a click stopped it, once; None when it finished."""
        return pop(self._marker)

    @contextmanager
    def bar(self, text: str, mark: Any = None, slot=None) -> Iterator[Callable[..., None]]:
        """A Stop button (in ``slot``, else the page) and a progress bar that starts at ``text``; yields
        ``update(fraction, text, mark=None)``. ``mark`` (and each update's, when given): where the run
        is, kept while it runs; None: a run that has nothing to say after a stop keeps none."""
        holder = st.empty() if slot is None else None  # the page's own Stop goes with its bar: none is left after the run
        (slot or holder).button("Stop", key=f"{self.name}_stop", help=self.stop_help)
        progress_bar = st.progress(0.0, text=text)
        if mark is not None:
            put(self._marker, mark)

        def update(fraction: float, text: str, mark: Any = None) -> None:
            if mark is not None:
                put(self._marker, mark)
            progress_bar.progress(min(max(fraction, 0.0), 1.0), text=text)

        try:
            yield update
        except Exception:  # the run failed: nothing was stopped. A stop is Streamlit's control exception, a
            pop(self._marker)  # BaseException raised out of ``update``: it leaves the mark
            progress_bar.empty()
            if holder is not None:
                holder.empty()
            raise
        pop(self._marker)
        progress_bar.empty()
        if holder is not None:
            holder.empty()

    @contextmanager
    def running(self, what: str, estimate_s: float | None = None) -> Iterator[Callable[[float, str], None]]:
        """``bar`` that says ``what: message, N s so far (about M s left)``; yields ``progress(fraction, message)``.
        Its mark, ``stopped``'s answer: {"fraction", "message", "seconds"}."""
        started = time.perf_counter()
        with self.bar(f"{what}…", {"fraction": 0.0, "message": "starting", "seconds": 0.0}) as update:
            def progress(fraction: float, message: str) -> None:
                seconds, fraction = time.perf_counter() - started, min(max(fraction, 0.0), 1.0)
                remaining = run_time.remaining_seconds(estimate_s, seconds, fraction)  # follows the batches' pace
                left = "" if remaining is None else f", about {remaining:.0f} s left"
                update(fraction, f"{what}: {message}, {seconds:.0f} s so far{left}",
                       {"fraction": fraction, "message": message, "seconds": seconds})

            yield progress

    @contextmanager
    def held(self, what: Any = None) -> Iterator["HeldStop"]:
        """A Stop button, and for a run that can end itself between two steps and return what it made (a
        generation, whose cache a branch reuses): a click that would end the script inside a Streamlit
        call made through ``hold.show`` is held there instead; ``hold.asked()`` then says True, so the run
        returns at its next step and hands what it made to ``hold.keep``, and the click is honoured (the
        page runs again) when the block ends. ``what`` names the run for ``finishing``."""
        slot = st.empty()
        slot.button("Stop", key=f"{self.name}_stop", help=self.stop_help)
        hold, done = HeldStop(), threading.Event()
        put(f"_holding_{self.name}", (what, done, hold))
        try:
            yield hold
        finally:
            done.set()
        if hold.request is not None:
            raise hold.request
        slot.empty()  # the run is over: no Stop left on the page

    def finishing(self, what: Any, timeout_s: float = 120.0) -> Any:
        """What a held run of ``what`` that a click stopped kept (``hold.keep``), once it has ended; None
        when there is none. A click outside a fragment does not wait for the run it stops: Streamlit stops
        that run and starts the page again at once (its fast reruns), and from then on every st.* call and
        session-state write of the stopped run raises again, so it cannot keep its result itself: the
        new run waits here for it and takes it."""
        mark = get(f"_holding_{self.name}", None)
        if mark is None or mark[0] != what:
            return None
        _, done, hold = mark
        done.wait(timeout_s)
        pop(f"_holding_{self.name}")
        return hold.kept if hold.asked() else None


class HeldStop:
    """A click held while a run ends itself (``StoppableRun.held``)."""

    def __init__(self) -> None:
        self.request: ScriptControlException | None = None
        self.kept: Any = None

    def keep(self, value: Any) -> None:
        """What the run made: kept without a Streamlit call (``StoppableRun.finishing`` hands it on)."""
        self.kept = value

    def show(self, draw: Callable[..., Any], *args, **kwargs) -> Any:
        """``draw(*args, **kwargs)`` (an st.* call), unless a click already asked the run to end."""
        if self.request is not None:
            return None
        try:
            return draw(*args, **kwargs)
        except ScriptControlException as request:  # Streamlit's stop or rerun on a click: kept for the block's end
            self.request = request
            return None

    def asked(self) -> bool:
        return self.request is not None
