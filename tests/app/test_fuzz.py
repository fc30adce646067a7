"""Every page driven by AppTest with random (seeded) prompts, URL values and widget settings: whatever
is chosen, the page shows results, a warning or an error, never an exception. Twelve sessions (every
page at least once) of four script runs each; widgets whose every value costs a long computation (RoPE-scaling losses, the KV-head
conversion, timing uncached generation, scoring the built-in coreference set) keep their defaults.

The sessions run under TXVIZ_MAX_TOKENS=256 (1024 by default), and the prompt "over the token limit" is
1.5 times that: the same path (past the limit, the Attention page's long view) at a sixth of the tokens.
At the default limit that one prompt (1500 words) made its session 25 s of the suite, most of it the
long view's T² work."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from tests.helpers.apptest import PAGE_NAMES, page_path

pytestmark = pytest.mark.default_model

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
PAGES = [page_path(name) for name in PAGE_NAMES]  # every page
SESSIONS = 12
ACTIONS = 2
MAX_TOKENS = 256  # the sessions' TXVIZ_MAX_TOKENS
OVER_THE_LIMIT = "word " * (MAX_TOKENS * 3 // 2)  # " word" is one token: past the limit, within the long view's
EXPENSIVE = {"rope_factor", "rope_text", "rope_text_tokens", "live_kv", "live_tokens", "kv_measure", "coref_builtin",
             "kv_new_tokens", "mem_upload", "to_flash_run", "to_rnn_run", "to_flash_max", "to_rnn_max",
             "rope_scaling_run", "causal_run"}
PIECES = ["Mary", " met", " John", " and", " she", " smiled", ".", " it", " the", " 42", "\n", "\t", "  ", "漢字",
          "中文", "שלום", "مرحبا", "😀", "👍🏽", "\x00", "\x1b", "\x1d", "e\u0301", "\u202e", "<|im_end|>", "<|endoftext|>",
          "<b>", "&amp;", "'", '"', "\\", "{{ x }}"]


def random_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(["", " ", "\n\t "])
    if roll < 0.15:
        return OVER_THE_LIMIT
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))


def random_params(rng: random.Random) -> dict:
    params = {"prompt": random_text(rng)}
    if rng.random() < 0.5:
        params["bos"] = rng.choice(["sink", "none", "bos", "junk"])
    if rng.random() < 0.3:
        params["coref_text"] = random_text(rng)
    if rng.random() < 0.4:
        params["layer"] = str(rng.choice([-3, 0, 5, 29, 30, 10**6]))
        params["head"] = str(rng.choice([-1, 0, 8, 9, 99]))
    return params


# Original values of choice widgets that show formatted labels (AppTest sets values, not labels)
INDEXED = {"rope_token", "rope_key_token", "coref_pronoun", "coref_target", "query_token", "lens_position"}


def choice_values(kind: str, widget) -> list | None:
    """What a selectbox, radio or segmented control may be set to, or None if its values are unknown."""
    if re.sub(r"(_[0-9a-f]{12})+$", "", widget.key) in INDEXED:  # keys that end in hashes of their inputs
        return list(range(len(widget.proto.options)))
    if widget.key == "bos":
        return ["sink", "none", "bos"]
    if widget.key == "grid_metric":
        from txviz.analysis.heads.metrics import METRICS
        return list(METRICS)
    if kind == "segmented_control":  # AppTest keeps no format_func for these: only where labels are values
        return [o.content for o in widget.proto.options] if widget.key == "mem_kind" else None
    labels = list(widget.proto.options)
    format_func = getattr(widget, "format_func", None)
    if format_func is None or all(str(format_func(label)) == label for label in labels):
        return labels  # the labels are the values
    return None


def widgets(at):
    kinds = ("slider", "select_slider", "number_input", "selectbox", "multiselect", "radio", "toggle", "text_input",
             "text_area", "button", "segmented_control", "button_group")
    found = []
    for kind in kinds:
        for widget in at.get(kind):
            key = getattr(widget, "key", None)
            if key and key not in EXPENSIVE and not getattr(widget.proto, "disabled", False):
                if kind == "button_group" and not key.startswith("coref_"):  # pills whose values are indices
                    continue
                if kind in ("selectbox", "radio", "segmented_control") and choice_values(kind, widget) is None:
                    continue
                if kind == "multiselect" and key != "coref_candidates":  # values known only there
                    continue
                found.append((kind, widget))
    return found


def act(rng: random.Random, kind: str, widget) -> str:
    """Give one widget a random value its own range allows; return what was done, for the message."""
    proto = widget.proto
    if kind == "slider":
        value = rng.randint(int(proto.min), int(proto.max))
        widget.set_value(value)
    elif kind in ("select_slider",):
        value = rng.randrange(len(proto.options))
        widget.set_value(value)
    elif kind == "number_input":
        low, high = proto.min, min(proto.max, 60 if widget.key == "ind_len" else proto.max)
        value = rng.randint(int(low), int(high)) if proto.data_type == proto.INT else rng.uniform(low, high)
        widget.set_value(value)
    elif kind in ("selectbox", "radio", "segmented_control"):
        value = rng.choice(choice_values(kind, widget))
        widget.set_value(value)
    elif kind == "multiselect":
        value = rng.sample(range(len(proto.options)), k=rng.randint(0, min(4, len(proto.options))))
        widget.set_value(value)
    elif kind == "button_group":  # the Coreference tab's strips of words: values are word indices
        n = len(proto.options)
        single = widget._is_single_select
        value = rng.choice([None, *range(n)]) if single else rng.sample(range(n), k=rng.randint(0, min(4, n)))
        widget.set_value(value)
    elif kind == "toggle":
        value = rng.random() < 0.5
        widget.set_value(value)
    elif kind in ("text_input", "text_area"):
        value = random_text(rng) if widget.key != "model_path" else rng.choice(
            ["", "../../etc/passwd", "/", str(Path(MAIN).parents[1] / "assets" / "zoo" / "base"), "x" * 300, "\x00"])
        widget.input(value)
    else:
        value = "click"
        widget.click()
    return f"{kind} {widget.key} = {value!r}"


@pytest.mark.parametrize("session", range(SESSIONS))
def test_random_sessions_never_show_an_exception(default_model_home, monkeypatch, session):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    monkeypatch.setenv("TXVIZ_MAX_TOKENS", str(MAX_TOKENS))
    rng = random.Random(1000 + session)
    at = AppTest.from_file(MAIN, default_timeout=300)
    params = random_params(rng)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    page = PAGES[session % len(PAGES)]
    at.switch_page(page).run()
    done = [f"url {params!r}", f"page {page}"]
    if page == page_path("heads") and rng.random() < 0.5:  # only the open tab runs: open the other one
        at.session_state["heads_tab"] = "Coreference"
        at.run()
        done.append("tab Coreference")
    assert not at.exception, (done, [e.value for e in at.exception])
    for _ in range(ACTIONS):
        choices = widgets(at)
        if not choices:
            break
        done.append(act(rng, *rng.choice(choices)))
        at.run()
        assert not at.exception, (done, [e.value for e in at.exception])
