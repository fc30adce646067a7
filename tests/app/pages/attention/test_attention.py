"""The Attention page's view state: in the URL and back (hide-sink, colour-by, query token, head), a
token index that follows its prompt, a prompt too long for a link kept by id; token text and undefined
metrics as a reader should see them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.apptest import MAIN, no_errors, pick_head
from tests.helpers.head_maps import heatmap

pytestmark = pytest.mark.default_model


@pytest.fixture
def new_app(default_model_home, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))

    def make(**params):
        at = AppTest.from_file(MAIN, default_timeout=300)
        for key, value in params.items():
            at.query_params[key] = value
        return at
    return make


def component(at, key: str) -> dict:
    """The data of the page's component mounted under ``key``."""
    (element,) = [e for e in at.get("bidi_component") if e.proto.id.endswith(key)]
    return json.loads(element.proto.json)


def grid(at) -> dict:
    """The head grid component's data (app/figures/head_grid.py grid_view)."""
    return component(at, "head_grid")


def params(at) -> dict:
    return {key: (value[0] if isinstance(value, list) else value) for key, value in at.query_params.items()}


def red_label(at) -> str:
    """The head view's query token: the one label drawn in red (app/components/head_view draws the figure)."""
    left = [t for t in component(at, "head_view")["figure"]["data"] if t.get("mode") == "text"][0]
    return next(text for text, color in zip(left["text"], left["textfont"]["color"]) if color == "red")


def test_the_view_state_round_trips_through_the_url(new_app):
    at = new_app().run()
    no_errors(at)
    assert params(at) == {}  # defaults stay out of the link
    at.toggle(key="hide_sink").set_value(True).run()
    at.selectbox(key="grid_metric").set_value("prev_token").run()
    at.select_slider(key="query_token").set_value(4).run()
    pick_head(at, head=5).run()
    no_errors(at)
    link = params(at)
    assert link == {"hide_sink": "1", "grid_metric": "prev_token", "query": "4", "head": "5"}

    shared = new_app(**link).run()  # someone opens the link
    no_errors(shared)
    assert shared.toggle(key="hide_sink").value is True
    assert shared.selectbox(key="grid_metric").value == "prev_token"
    assert shared.select_slider(key="query_token").value == 4 and red_label(shared).endswith("'t")
    assert "head 5" in heatmap(shared)["layout"]["title"]["text"]
    assert grid(shared)["metric"] == "prev_token" and "prev_token" in grid(shared)["hover"][0][0]
    assert grid(shared)["selected"] == [0, 5]  # the link's head is the one outlined
    assert np.nansum(_z(shared)[1:, 0]) == 0  # drawn without the sink
    assert params(shared) == link


def _z(at) -> np.ndarray:
    from tests.helpers.apptest import decode

    return decode(heatmap(at)["data"][0]["z"]).astype(float)


def test_the_query_token_follows_its_prompt(new_app):
    """A token index means nothing in another prompt: a new prompt puts the query back on its last token."""
    at = new_app().run()
    at.select_slider(key="query_token").set_value(3).run()
    assert params(at)["query"] == "3"
    at.sidebar.text_area(key="prompt").input("Paris is the capital of France.").run()
    no_errors(at)
    slider = at.select_slider(key="query_token")
    assert slider.value == len(slider.options) - 1 and "query" not in params(at)
    assert red_label(at) == "."
    broken = new_app(query="999").run()  # a link past the prompt: the last token
    no_errors(broken)
    assert broken.select_slider(key="query_token").value == len(broken.select_slider(key="query_token").options) - 1


def test_a_prompt_too_long_for_a_link_goes_by_id(new_app):
    from app.ui.state import MAX_URL_VALUE

    long_prompt = "中文" * 120  # 240 characters, 2,160 once URL-encoded
    at = new_app().run()
    at.sidebar.text_area(key="prompt").input(long_prompt).run()
    no_errors(at)
    link = params(at)
    assert "prompt" not in link and len(link["prompt_id"]) == 16
    assert sum(len(k) + len(v) for k, v in link.items()) < MAX_URL_VALUE
    assert any("too long for a link" in c.value for c in at.sidebar.caption)

    shared = new_app(**link).run()  # the same server: the text comes back from its store
    no_errors(shared)
    assert shared.sidebar.text_area(key="prompt").value == long_prompt
    assert any("中" in label for label in heatmap(shared)["data"][0]["x"])

    shorter = shared.sidebar.text_area(key="prompt").input("Short again.").run()
    assert params(shorter) == {"prompt": "Short again."}  # a short prompt is in the link itself again

    forgotten = new_app(prompt_id="0123456789abcdef").run()  # the server restarted since
    no_errors(forgotten)
    assert any("restarted" in c.value for c in forgotten.sidebar.caption)
    assert forgotten.sidebar.text_area(key="prompt").value == "The trophy didn't fit in the suitcase because it was too big."


def test_split_characters_are_shown_whole(new_app):
    at = new_app(prompt="I 😀 you 🦜").run()
    no_errors(at)
    strip = next(m.value for m in at.markdown if "txviz-strip" in m.value)
    assert "😀" in strip and "🦜" in strip and "\\x" not in strip
    assert "f0 9f · one character with tokens" in strip  # the first half's tooltip: its bytes, and whose they are
    labels = heatmap(at)["data"][0]["x"]
    assert any(label.endswith("😀") for label in labels) and not any("\\x" in label for label in labels)


def test_undefined_metrics_are_blank_with_a_reason(new_app):
    at = new_app(prompt="One two three four.", grid_metric="induction").run()  # nothing repeats
    no_errors(at)
    table = at.dataframe[0].value
    assert table["induction"].isna().all() and table["entropy"].notna().all()
    assert str(table["induction"].dtype) == "float64" and at.dataframe[0].proto.placeholder == "—"  # not "None"
    columns = json.loads(at.dataframe[0].proto.columns)
    assert "no token of this prompt repeats" in columns["induction"]["help"] and "—" in columns["induction"]["help"]
    assert "help" in columns["entropy"] and "undefined" not in columns["entropy"]["help"]
    assert all("undefined for this prompt" in cell for row in grid(at)["hover"] for cell in row)
    assert any("grey: undefined" in c.value for c in at.caption)


def test_the_page_trace_runs_on_one_thread_while_the_machine_is_oversubscribed(monkeypatch):
    """OpenMP's barriers wait for descheduled threads: under load the page's trace runs on one thread
    (a 64-token trace took 7.1 s on 2 threads, 0.64 s on one, at load 10 on 2 cores)."""
    import torch

    from txviz import threads

    assert threads.threads_for_load(2, busy=0.0, cpus=2) == 2
    assert threads.threads_for_load(2, busy=1.0, cpus=2) == threads.threads_for_load(4, busy=9.5, cpus=2) == 1
    seen = []
    for busy in (9.5, 0.0):
        monkeypatch.setattr(threads, "others_running", lambda busy=busy: busy)
        monkeypatch.setattr(threads.os, "getloadavg", lambda busy=busy: (busy, busy, busy))
        with threads.threads_for_this_run():
            seen.append(torch.get_num_threads())
        assert torch.get_num_threads() == threads.PROCESS_THREADS  # the process's own count again
    assert seen == [1, threads.threads_for_load(threads.PROCESS_THREADS, 0.0, threads.os.cpu_count())]


def test_the_layer_profile_is_each_layers_mean_over_its_heads_and_follows_a_new_prompt(new_app):
    """The per-layer means are the table's, to the float; a new prompt redraws them from its own table
    (a state change, not only a first render), and a head switch leaves the figure as it was."""
    from tests.helpers.apptest import chart, decode

    def profile_and_table(at):
        figure, table = chart(at, "layer_profile"), at.dataframe[0].value
        lines = {trace["name"]: decode(trace["y"]) for trace in figure["data"]}
        return lines, table

    at = new_app(prompt="The cat sat on the mat because the cat was tired.").run()
    no_errors(at)
    lines, table = profile_and_table(at)
    n_layers = int(table["layer"].max()) + 1
    for metric in ("first_token_mass", "prev_token", "induction", "max_weight"):
        means = table.groupby("layer")[metric].mean().to_numpy()
        assert len(lines[metric]) == n_layers
        np.testing.assert_allclose(lines[metric], means, rtol=1e-12)
    pick_head(at, head=3).run()
    after_switch = profile_and_table(at)[0]
    assert all(np.array_equal(after_switch[m], lines[m], equal_nan=True) for m in lines)  # unchanged by a head switch
    at.sidebar.text_area(key="prompt").input("Paris is the capital of France. Paris is").run()
    no_errors(at)
    new_lines, new_table = profile_and_table(at)
    np.testing.assert_allclose(new_lines["prev_token"], new_table.groupby("layer")["prev_token"].mean().to_numpy(),
                               rtol=1e-12)
    assert not np.allclose(new_lines["prev_token"], lines["prev_token"])
