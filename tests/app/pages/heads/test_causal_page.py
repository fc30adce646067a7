"""The Heads page's "Test it (causal)" section through AppTest: on the zoo's tiny
base_long model (word-level vocabulary, fast) the run on a button, the kept result, a counterfactual
edited after a run, a pair of unequal token length; on the default model the trophy pair, whose
logit differences must equal those of a plain forward."""

from __future__ import annotations

import html

import numpy as np

import pytest

from app.services.zoo import zoo_path
from tests.helpers.apptest import MAIN, app_on, chart, decode, no_errors, page_path, texts
from tests.helpers.spy import spy
from txviz.loading import load

SENTENCE = "Mary gave the book to John because she was happy."  # words of the tiny model's stories
TROPHY = "The trophy didn't fit in the suitcase because it was too big."


def causal_page(at, sentence: str):
    at.query_params["coref_text"] = sentence  # a link with a sentence opens on the Coreference tab
    at.run()
    at.switch_page(page_path("heads")).run()
    no_errors(at)
    return at


def corrupt_input(at):
    found = [w for w in at.text_input if w.key and w.key.startswith("causal_corrupt_")]
    assert len(found) == 1, [w.key for w in at.text_input]
    return found[0]


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def clean_diff(at) -> float:
    return float(next(v for label, v in metrics(at).items() if label.startswith("Logit difference")))


@pytest.fixture(autouse=True)
def fresh_stores():
    """A causal report is kept for every session of the process: each test starts without one. Only the
    app's shared stores are emptied (app.cache._shared, which holds the causal reports): the loaded models
    stay, so the trophy test and the next tests on this worker do not load the default model again."""
    from app import cache

    cache._shared.clear()
    yield
    cache._shared.clear()


@pytest.fixture
def tiny_app():
    return causal_page(app_on(model=str(zoo_path("base_long"))), SENTENCE)


def test_the_test_runs_on_a_button_and_shows_every_part(tiny_app):
    at = tiny_app
    assert not any(label.startswith("Logit difference") for label in metrics(at))  # nothing runs before the click
    assert "forward passes" in texts(at)
    at.button(key="causal_run").click().run()
    no_errors(at)
    assert "…on the counterfactual" in metrics(at)
    body = texts(at)
    assert "on the sentence and" in body and "on the counterfactual." in body
    assert "Looks at the answer vs moves the answer" in body and "top-10 overlap" in body
    assert "Attribution patching vs exact patching" in body and "Largest patching effects (" in body  # no flip
    table = at.dataframe[-1].value
    assert len(table) == 16 and list(table["patching rank"])[:3] == [1, 2, 3]
    assert (table["patching"].abs().diff().dropna() <= 1e-9).all()  # sorted by the size of the effect
    request = at.session_state["_causal_last_run"]
    tokens = load(zoo_path("base_long"), device="cpu").tokenizer.encode(request.clean, bos=request.bos).tokens
    grid = chart(at, "causal_residual")["data"][0]
    # one column per token, labelled; "<" and ">" as entities, which plotly shows as the characters
    assert grid["x"] == [f"{i}:{html.escape(t, quote=False)}" for i, t in enumerate(tokens)]
    assert decode(grid["z"]).shape == (4, len(tokens))  # base_long's 4 layers
    assert "deciding word's column" not in body and "where the two prompts differ" in body  # none is marked
    assert "not yet seen the deciding word" not in body and "cannot depend on anything said after it" in body
    assert {chart(at, "causal_chart_left")["layout"]["title"]["text"],
            chart(at, "causal_chart_right")["layout"]["title"]["text"]} == {
        "Attention margin at the pronoun (looks at the answer)", "Patching effect (from the counterfactual)"}


def test_a_kept_result_is_shown_without_a_new_run_and_an_edit_hides_it(tiny_app):
    at = tiny_app
    at.button(key="causal_run").click().run()
    first = clean_diff(at)
    at.run()  # a rerun (e.g. sorting the table) shows the kept result without pressing again
    assert clean_diff(at) == first
    other = causal_page(app_on(model=str(zoo_path("base_long"))), SENTENCE)  # another session, same inputs
    assert clean_diff(other) == first and not [b for b in other.button if b.key == "causal_run"]
    edited = corrupt_input(at).value.replace("happy", "hungry")
    corrupt_input(at).input(edited).run()
    no_errors(at)
    assert not any(label.startswith("Logit difference") for label in metrics(at))  # not the old pair's numbers
    assert "The inputs changed since the last run" in texts(at)
    at.button(key="causal_run").click().run()
    no_errors(at)
    assert at.session_state["_causal_last_run"].corrupt == edited
    assert "…on the counterfactual" in metrics(at)


def test_a_counterfactual_of_another_token_length_is_refused_with_what_to_change(tiny_app):
    at = tiny_app
    corrupt_input(at).input(corrupt_input(at).value.replace("happy", "very happy")).run()
    no_errors(at)
    warning = " ".join(w.value for w in at.warning)
    assert "same token count" in warning and "tokens and the counterfactual" in warning
    assert not [b for b in at.button if b.key == "causal_run"]


@pytest.mark.default_model
def test_the_trophy_pair_shows_the_logit_differences_of_a_plain_forward(default_model, default_model_home,
                                                                          causal_memo, monkeypatch):
    """The two logit differences of the report the page shows equal logit(" trophy") − logit(" suit") of one
    plain forward of each prompt, tokenized as the page did (``txviz patch`` prints the same: tests/causal).
    The run is the session's causal memo (measured once for this test, the CLI's and the browser's)."""
    import torch
    from streamlit.testing.v1 import AppTest

    from app import cache
    from txviz.causal.metric import answer_tokens, logit_diff

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    runs = spy(monkeypatch, cache, "get_causal_report")  # the report the page shows
    at = causal_page(AppTest.from_file(MAIN, default_timeout=600), TROPHY)
    at.button(key="causal_run").click().run()
    no_errors(at)
    request = at.session_state["_causal_last_run"]
    assert request.corrupt.startswith(TROPHY.replace("big", "small")) and request.answer == "trophy"
    tokenizer = default_model.tokenizer
    words = answer_tokens(tokenizer, " trophy", " suitcase")
    assert runs.last_args[1] == request
    report = runs.last
    shown = {request.clean: report["clean_logit_diff"], request.corrupt: report["corrupt_logit_diff"]}
    for text, value in shown.items():
        ids = torch.tensor(tokenizer.encode(text, bos=request.bos).ids)
        with torch.no_grad():
            expected = float(logit_diff(default_model.model(ids), words.answer_id, words.wrong_id)[0])
        assert value == pytest.approx(expected, abs=5e-4), text


def test_the_attention_page_draws_one_head_on_a_prompt_pair_and_their_difference():
    at = app_on(model=str(zoo_path("base_long")), prompt="Mary gave the book to John because she was happy.")
    at.run()
    at.session_state["pair_open"] = True  # what a click on the expander does
    at.run()
    at.text_input(key="pair_prompt").input("Mary gave the book to John because she was hungry.").run()
    no_errors(at)
    figure = chart(at, "pair_maps")
    assert [trace["type"] for trace in figure["data"]] == ["heatmap"] * 3
    difference = np.nan_to_num(decode(figure["data"][2]["z"]).astype(float))  # the future cells: NaN
    changed = next(i for i, (a, b) in enumerate(zip(figure["data"][0]["x"], figure["data"][1]["x"])) if a != b)
    assert not difference[:changed].any()  # rows before the swapped word cannot see it
    assert difference[changed:].any()
    at.text_input(key="pair_prompt").input("Mary gave the book to John because she was very happy.").run()
    no_errors(at)
    assert any("need the same token count" in w.value for w in at.warning)
