"""The Decoding page through AppTest, on the zoo's base model (and the Gemma 3 stand-in for sliding
windows): tokens stream in through the run's step callback before it ends, a click held mid-run keeps
the tokens so far, the scrubber shows the chosen step's own record without running the model, a branch
equals a run from scratch with the same prefix and choice, changed inputs never show the old run, and
the settings travel in the URL. The real models and the browser: tests/browser/test_decoding.py."""

from __future__ import annotations

import pytest
import torch
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from app.app_pages.decoding import generation
from app.services import decoding
from tests.helpers.apptest import aim_at, app_on, chart, decode as plotly_array, no_errors, open_at
from tests.helpers.gemma_standin import gemma_home  # noqa: F401  (a fixture)
from tests.helpers.spy import spy
from txviz.decoding import decode
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

ZOO = str(SHIPPED_ZOO / "base")
N_NEW = 12


def page(model: str = ZOO, prompt: str | None = None, **settings):
    at = open_at("decoding", model=model, prompt=prompt or sample_text(3), timeout=300)
    for key, value in {"dec_new": N_NEW, **settings}.items():
        at.session_state[key] = value
    at.run()
    no_errors(at)
    return at


def generate(at):
    at.button(key="dec_generate").click().run()
    no_errors(at)
    return kept(at)


def kept(at):
    """The run the page keeps for the settings on screen (None: none)."""
    return at.session_state["_decodings"].get(shown_inputs(at)) if "_decodings" in at.session_state else None


def shown_inputs(at):
    from app.services.models import load_model

    loaded = load_model(at.session_state["model"])
    sample = at.session_state["dec_sampler"] == "sample"
    return decoding.DecodingInputs(
        source=at.session_state["model"], prompt=at.session_state["prompt"], bos=at.session_state["bos"],
        chat=bool(at.session_state["dec_chat"] and loaded.tokenizer.chat_template),
        max_new_tokens=at.session_state["dec_new"], sampler=at.session_state["dec_sampler"],
        **({"temperature": at.session_state["dec_temp"], "top_k": at.session_state["dec_top_k"],
            "top_p": at.session_state["dec_top_p"], "seed": at.session_state["dec_seed"]} if sample else {}))


PANELS = {"sampler": "x", "kv": "x2", "attention row": "x3", "heads": "x4"}  # the step figure's panels, by x axis


def panel(at, name: str) -> dict:
    """One panel of the step's figure: its traces and its shapes."""
    figure, axis = chart(at, "dec_step_chart"), PANELS[name]
    return {"data": [t for t in figure["data"] if t.get("xaxis", "x") == axis],
            "shapes": [s for s in figure["layout"].get("shapes", []) if s["xref"] in (axis, f"{axis} domain")]}


def pills(at, key: str):
    return next(group for group in at.get("button_group") if group.key == key)


def reference(at, inputs=None):
    """The same run made by the library directly, from the page's own prompt ids."""
    from app import cache
    from app.services.models import load_model

    inputs = inputs or shown_inputs(at)
    loaded = load_model(inputs.source)
    ids = decoding.prompt_ids(loaded, inputs, cache.limits())
    return decode(loaded.model, ids, inputs.max_new_tokens, sampling=inputs.sampling,
                  record=decoding.record_request(loaded.config), stop_ids=(loaded.tokenizer.eos_id,))


def test_tokens_stream_in_before_the_run_ends(monkeypatch):
    at = page()
    ended = []
    drawn = []
    original_run = decoding.run

    def run(*args, **kwargs):
        value = original_run(*args, **kwargs)
        ended.append(True)
        return value

    strip = generation.charts.token_strip_html

    def seen(tokens, special, **kwargs):
        drawn.append((list(tokens), bool(ended)))
        return strip(tokens, special, **kwargs)

    monkeypatch.setattr(decoding, "run", run)
    monkeypatch.setattr(generation.charts, "token_strip_html", seen)
    run_ = generate(at)
    texts = [step.token.text for step in run_.steps]
    assert [tokens for tokens, _ in drawn] == [texts[:n] for n in range(1, len(texts) + 1)]
    assert not any(after for _, after in drawn)  # every token was drawn while the run was under way


def test_a_click_mid_run_stops_it_and_keeps_the_tokens_so_far(monkeypatch):
    """Streamlit ends a script at the st.* call after a click: here the fourth token's strip meets it."""
    at = page(dec_new=20)
    from streamlit.delta_generator import DeltaGenerator

    markdown, calls = DeltaGenerator.markdown, []

    def clicked_at_the_fourth(self, body, *args, **kwargs):
        if isinstance(body, str) and "txviz-strip" in body:
            calls.append(body)
            if len(calls) == 4:
                raise StopException()
        return markdown(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "markdown", clicked_at_the_fourth)
    at.button(key="dec_generate").click().run()
    monkeypatch.undo()
    at.run()  # the run after the click
    no_errors(at)
    run = kept(at)
    assert run.stop_reason == "stopped" and len(run.steps) == 4
    assert run.new_ids == reference(at).new_ids[:4]
    assert all(step.lens is not None for step in run.steps)  # the lens is read for what was kept
    assert [p.options for p in at.get("button_group") if p.key == "dec_pick"] != []
    assert "Stopped (the Stop button) after 4 tokens" in " ".join(c.value for c in at.caption)


def test_scrubbing_shows_the_chosen_steps_record_and_runs_nothing(monkeypatch):
    at = page()
    run = generate(at)
    expected = reference(at)
    forward = spy(monkeypatch, type(torch.nn.Module()), "__call__")
    for index in (3, 7):
        at.slider(key="dec_step").set_value(index).run()
        no_errors(at)
        step = expected.steps[index]
        bars = panel(at, "sampler")["data"]
        assert list(plotly_array(bars[0]["y"])) == pytest.approx([c.prob for c in step.candidates], abs=1e-6)
        assert list(plotly_array(bars[-1]["y"])) == pytest.approx([c.prob_sampled for c in step.candidates], abs=1e-6)
        row = plotly_array(panel(at, "attention row")["data"][0]["y"])
        layer, head = at.session_state["layer"], at.session_state["head"]
        assert list(row) == pytest.approx(step.attention[layer][head].tolist(), abs=1e-6)
        assert len(row) == run.steps[index].position
    pills(at, "dec_pick").set_value(1).run()  # a click on the second generated token
    assert at.session_state["dec_step"] == 1 and at.slider(key="dec_step").value == 1
    at.selectbox(key="layer").set_value(2).run()
    at.selectbox(key="head").set_value(3).run()
    row = plotly_array(panel(at, "attention row")["data"][0]["y"])
    assert list(row) == pytest.approx(expected.steps[1].attention[2][3].tolist(), abs=1e-6)
    assert not forward.made  # no module of the model ran


def test_a_branch_continues_on_the_cache_and_equals_a_run_from_scratch():
    at = page()
    run = generate(at)
    at.slider(key="dec_step").set_value(2).run()
    other = next(c for c in run.steps[2].candidates if c.id != run.steps[2].token.id)
    pills(at, "dec_branch").set_value(other.id).run()
    no_errors(at)
    branched = next(iter(at.session_state["_decoding_branches"].values()))
    assert branched.new_ids[:3] == run.new_ids[:2] + (other.id,)
    assert branched.reused_tokens == run.steps[2].position  # every token before the chosen one
    inputs = shown_inputs(at)
    scratch_ids = list(run.prompt_ids) + list(branched.new_ids[:3])
    from app.services.models import load_model

    loaded = load_model(inputs.source)
    scratch = decode(loaded.model, scratch_ids, N_NEW - 3, record=decoding.record_request(loaded.config),
                     stop_ids=(loaded.tokenizer.eos_id,))
    assert branched.new_ids[3:] == scratch.new_ids
    said = " ".join(c.value for c in at.caption)
    assert f"reused the cache of {run.steps[2].position} tokens" in said


def test_a_click_mid_branch_stops_it_and_keeps_its_tokens_so_far(monkeypatch):
    """The branch streams in the page body, outside the step's fragment, so a click reaches it: here the
    branch's third token meets it (Streamlit ends a script at the st.* call after a click)."""
    at = page()
    run = generate(at)
    at.slider(key="dec_step").set_value(2).run()
    other = next(c for c in run.steps[2].candidates if c.id != run.steps[2].token.id)
    from streamlit.delta_generator import DeltaGenerator

    markdown, strips = DeltaGenerator.markdown, []

    def clicked_at_the_third(self, body, *args, **kwargs):
        if isinstance(body, str) and "txviz-strip" in body:
            strips.append(body)
            if len(strips) == 3:
                raise StopException()
        return markdown(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "markdown", clicked_at_the_third)
    pills(at, "dec_branch").set_value(other.id).run()
    monkeypatch.undo()
    at.run()  # the run after the click
    no_errors(at)
    branched = at.session_state["_decoding_branches"][(shown_inputs(at), run.new_ids, 2, other.id)]
    assert branched.stop_reason == "stopped" and len(branched.steps) == 2 + 3  # the run's two, the branch's three
    inputs = shown_inputs(at)
    from app.services.models import load_model

    loaded = load_model(inputs.source)
    scratch = decode(loaded.model, list(run.prompt_ids) + list(run.new_ids[:2]) + [other.id], N_NEW - 3,
                     record=decoding.record_request(loaded.config), stop_ids=(loaded.tokenizer.eos_id,))
    assert branched.new_ids[:3] == run.new_ids[:2] + (other.id,) and branched.new_ids[3:] == scratch.new_ids[:2]
    assert "_decoding_branch_asked" not in at.session_state and "decoding_branch_stop" not in [b.key for b in at.button]
    assert "It was stopped" in " ".join(c.value for c in at.caption)
    at.run()
    assert at.session_state["_decoding_branches"][(inputs, run.new_ids, 2, other.id)] is branched  # not run again


def test_a_new_seed_or_prompt_never_shows_the_old_generation():
    at = page(dec_sampler="sample", dec_temp=1.5, dec_seed=1)
    first = generate(at)
    at.number_input(key="dec_seed").set_value(2).run()
    no_errors(at)
    assert kept(at) is None and not at.get("plotly_chart")  # nothing shown until Generate
    second = generate(at)
    assert second.new_ids == reference(at).new_ids != first.new_ids
    at.session_state["prompt"] = sample_text(5)
    at.run()
    assert kept(at) is None and not at.get("plotly_chart")
    at.session_state["prompt"] = sample_text(3)
    at.number_input(key="dec_seed").set_value(1).run()
    assert kept(at).new_ids == first.new_ids  # the run of these very inputs, kept


def test_the_settings_travel_in_the_url():
    at = aim_at(app_on(ZOO, sample_text(3), timeout=300), "decoding")
    for key, value in {"dec_sampler": "sample", "dec_temp": "0.7", "dec_top_k": "5", "dec_top_p": "0.9",
                       "dec_seed": "3", "dec_new": "9"}.items():
        at.query_params[key] = value
    at.run()
    no_errors(at)
    assert (at.slider(key="dec_temp").value, at.number_input(key="dec_top_k").value, at.slider(key="dec_top_p").value,
            at.number_input(key="dec_seed").value, at.slider(key="dec_new").value) == (0.7, 5, 0.9, 3, 9)
    at.number_input(key="dec_seed").set_value(4).run()
    assert at.query_params["dec_seed"] == "4" and at.query_params["dec_top_k"] == "5"
    run = generate(at)
    assert run.sampling.temperature == 0.7 and run.sampling.top_k == 5 and run.sampling.seed == 4
    assert all(step.kept <= 5 for step in run.steps)


def test_a_sliding_layer_shows_its_cut_and_stops_growing_in_the_cache(gemma_home):
    at = page(model="gemma3-270m", prompt="the cat sat on the mat and the dog sat on the log", dec_new=8, bos="bos")
    run = generate(at)
    at.slider(key="dec_step").set_value(len(run.steps) - 1).run()
    at.selectbox(key="layer").set_value(0).run()  # a sliding layer, window 8
    no_errors(at)
    step = run.steps[-1]
    shapes = panel(at, "attention row")["shapes"]
    assert shapes and shapes[1]["x0"] == pytest.approx(step.query_position - 8 + 0.5)
    row = step.attention[0][at.session_state["head"]]
    assert float(row[:step.query_position - 8 + 1].abs().max()) == 0.0  # the keys beyond the window get nothing
    kv = panel(at, "kv")["data"]
    measured, formula = plotly_array(kv[0]["y"]), plotly_array(kv[1]["y"])
    assert list(measured) == pytest.approx(list(formula))
    assert measured[0] < measured[5]  # layer 0 keeps its window, layer 5 every token


@pytest.mark.default_model
def test_smollm2_in_its_chat_template_generates_what_the_library_does(default_model_home, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    at = page(model="default", prompt="What is the capital of France?", dec_new=8)
    assert at.toggle(key="dec_chat").value  # SmolLM2 has a chat template: on by default
    run = generate(at)
    from app.services.models import load_model

    tokenizer = load_model("default").tokenizer
    assert tokenizer.display(run.prompt_ids[1]) == "<|im_start|>"  # after the sink: the template's first token
    assert run.new_ids == reference(at).new_ids and "Paris" in tokenizer.decode(list(run.new_ids))
    at.slider(key="dec_step").set_value(2).run()
    no_errors(at)
    assert chart(at, "dec_lens_strip")["data"][0]["y"][2].endswith(run.steps[2].token.text)


def test_a_step_is_timed_without_the_cache_once_on_a_click(monkeypatch):
    at = page()
    generate(at)
    at.slider(key="dec_step").set_value(4).run()
    assert not any("without the cache (all" in m.value for m in at.markdown)
    timed = spy(monkeypatch, decoding, "seconds_without_cache")
    at.button(key="dec_uncached").click().run()
    no_errors(at)
    assert len(timed.made) == 1 and timed.last > 0
    assert any(f"without the cache (all {kept(at).steps[4].position} tokens again)" in m.value for m in at.markdown)
    at.run()
    assert "dec_uncached" not in [b.key for b in at.button] and len(timed.made) == 1  # measured once
    at.slider(key="dec_step").set_value(5).run()
    assert "dec_uncached" in [b.key for b in at.button] and len(timed.made) == 1


def test_a_run_stopped_before_its_first_token_says_so(monkeypatch):
    at = page()
    monkeypatch.setattr(decoding, "run", lambda loaded, inputs, ids, **kwargs: decode(
        loaded.model, ids, inputs.max_new_tokens, should_stop=lambda: True))
    generate(at)
    assert any("stopped before its first token" in i.value for i in at.info) and not at.get("plotly_chart")
