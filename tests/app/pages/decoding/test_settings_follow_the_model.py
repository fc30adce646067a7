"""The Decoding page's settings read what the model allows: the chat template toggle shows what the run
does (off on a model without a template, the reader's choice kept for a model with one), a link's
nonsense numbers fall back to the defaults (a seed the number box cannot hold exactly among them), and the new tokens stop at what the model's context holds."""

from __future__ import annotations

import pytest

from app.app_pages.decoding import settings
from app.ui import state
from tests.helpers.apptest import aim_at, app_on, no_errors, open_at, pick_model
from tests.helpers.chatml_home import home_with_template  # noqa: F401  (a fixture)
from tests.helpers.spy import spy
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "base").is_dir(), reason="the zoo is not shipped")


def chat_toggle(at):
    return next(toggle for toggle in at.toggle if toggle.label == "Chat template")


def test_the_chat_toggle_reads_off_on_a_model_without_a_template_and_comes_back_on(home_with_template):
    at = open_at("decoding", prompt="the the", timeout=300)
    no_errors(at)
    assert chat_toggle(at).value is True and not chat_toggle(at).proto.disabled
    default = at.sidebar.selectbox(key="model_choice").value
    pick_model(at, "base").run()
    no_errors(at)
    shown = chat_toggle(at)
    assert shown.value is False and shown.proto.disabled  # the run goes in without a template: the toggle says so
    assert at.session_state["dec_chat"] is True  # the reader's choice, for a model that has one
    at.sidebar.selectbox(key="model_choice").set_value(default).run()
    no_errors(at)
    assert chat_toggle(at).value is True and not chat_toggle(at).proto.disabled


@pytest.mark.parametrize("nonsense", ["nan", "inf", "-inf", "abc"])
def test_a_links_nonsense_temperature_or_top_p_opens_on_the_defaults(nonsense):
    at = aim_at(app_on(str(SHIPPED_ZOO / "base"), sample_text(3), timeout=300), "decoding")
    for key, value in {"dec_sampler": "sample", "dec_temp": nonsense, "dec_top_p": nonsense}.items():
        at.query_params[key] = value
    at.run()
    no_errors(at)
    assert (at.slider(key="dec_temp").value, at.slider(key="dec_top_p").value) == (1.0, 1.0)  # not a clamp's end
    at.slider(key="dec_temp").set_value(0.5).run()
    assert at.slider(key="dec_temp").value == 0.5 and at.slider(key="dec_top_p").value == 1.0


def sampling_link(**settings_in_url):
    at = aim_at(app_on(str(SHIPPED_ZOO / "base"), sample_text(3), timeout=300), "decoding")
    for key, value in {"dec_sampler": "sample", **settings_in_url}.items():
        at.query_params[key] = value
    return at.run()


@pytest.mark.parametrize("seed", ["99999999999999999999", str(state.MAX_EXACT_INT + 1), "-1", "1.5", "1e3"])
def test_a_links_seed_the_box_cannot_hold_exactly_opens_on_the_default(monkeypatch, seed):
    runs = spy(monkeypatch, settings, "draw")
    at = sampling_link(dec_seed=seed)
    no_errors(at)
    assert at.number_input(key="dec_seed").value == 0 and runs.last.seed == 0
    assert "dec_seed" not in at.query_params
    at.slider(key="dec_temp").set_value(0.5).run()  # the next interaction keeps it
    assert runs.last.seed == 0 and runs.last.temperature == 0.5


def test_the_largest_seed_the_box_holds_exactly_is_kept():
    at = sampling_link(dec_seed=str(state.MAX_EXACT_INT))
    no_errors(at)
    assert at.number_input(key="dec_seed").value == state.MAX_EXACT_INT == at.number_input(key="dec_seed").max
    at.number_input(key="dec_seed").set_value(7).run()
    assert at.query_params["dec_seed"] == "7"


@pytest.mark.parametrize("top_k", ["-3", "99999999999999999999"])
def test_a_links_top_k_that_is_no_setting_opens_on_the_default(monkeypatch, top_k):
    runs = spy(monkeypatch, settings, "draw")
    at = sampling_link(dec_sampler="greedy", dec_top_k=top_k)  # the sampler's boxes not drawn: nothing clamps it
    no_errors(at)
    assert at.session_state["dec_top_k"] == 0 and "dec_top_k" not in at.query_params
    at = sampling_link(dec_top_k=top_k)
    no_errors(at)
    assert at.number_input(key="dec_top_k").value == 0 and runs.last.top_k == 0


def test_the_new_tokens_end_inside_the_models_context_and_past_it_the_page_names_the_knob():
    at = aim_at(app_on(str(SHIPPED_ZOO / "base"), sample_text(3), timeout=300), "decoding")
    at.query_params["dec_new"] = "99999"
    at.run()
    no_errors(at)
    from app.services.models import load_model

    context = load_model(str(SHIPPED_ZOO / "base")).config.max_seq_len
    assert context < settings.MOST_NEW  # the zoo's context is shorter than the slider's usual end
    assert at.slider(key="dec_new").max == context - 1 and at.slider(key="dec_new").value == context - 1
    warning = " ".join(w.value for w in at.warning)
    assert "Ask for at most" in warning and "Shorten it." not in warning  # the prompt fits: fewer new tokens do
    at.slider(key="dec_new").set_value(8).run()
    assert not at.warning and at.button(key="dec_generate").label == "Generate"


def test_the_chat_toggle_sits_under_the_sampler_so_an_800px_window_clips_neither():
    at = aim_at(app_on(str(SHIPPED_ZOO / "base"), sample_text(3), timeout=300), "decoding")
    at.run()
    no_errors(at)
    sampler_column = next(column for column in at.columns
                          if any(group.key == "dec_sampler" for group in column.get("button_group")))
    assert [toggle.label for toggle in sampler_column.toggle] == ["Chat template"]
    assert len([column for column in at.columns if column.get("slider") or column.get("button_group")]) == 2
