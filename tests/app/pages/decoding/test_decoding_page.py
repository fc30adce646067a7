"""The Decoding page through AppTest, on the zoo's base model (and the Gemma 3 stand-in for sliding
windows): tokens stream in through the run's step callback before it ends, a click held mid-run keeps
the tokens so far, the scrubber shows the chosen step's own record without running the model, a branch
equals a run from scratch with the same prefix and choice, changed inputs never show the old run, and
the settings travel in the URL. The real models and the browser: tests/browser/test_decoding.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from app.app_pages.decoding import generation
from app.components.decoding_steps import payload
from app.services import decoding
from tests.helpers.apptest import aim_at, app_on, chart, no_errors, open_at, pick_head
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


def viewer(at) -> dict | None:
    """The step viewer's view (run id, step, layer, head), None when the page shows none."""
    for element in at.get("bidi_component"):
        if element.proto.id and element.proto.id.endswith("dec_steps"):
            return json.loads(element.proto.json)
    return None


def records_blob(at) -> bytes:
    return next(e.proto.bytes for e in at.get("bidi_component") if e.proto.id.endswith("dec_steps_run"))


def records(at):
    """(header, per step {layer: rows}) as the browser decodes the viewer's records."""
    return payload.read_blob(records_blob(at))


def pick(at, step: int, layer: int | None = None, head: int | None = None):
    """What the viewer's handler does once the reader stopped on a step, layer and head in the browser
    (scrubber.picked; AppTest cannot click inside a custom component, and the handler's reading of the
    message is tested in tests/app/components/test_decoding_steps_payload.py)."""
    at.session_state["dec_step"] = step
    pick_head(at, layer, head)
    at.run()
    no_errors(at)
    return at


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


def click_stop_at_strip(monkeypatch, n: int) -> list[str]:
    """A Stop click that Streamlit meets at the ``n``-th token strip the script writes (it ends a script at the
    st.* call after a click); returns the strips written, the ``n``-th included."""
    from streamlit.delta_generator import DeltaGenerator

    markdown, strips = DeltaGenerator.markdown, []

    def clicked(self, body, *args, **kwargs):
        if isinstance(body, str) and "txviz-strip" in body:
            strips.append(body)
            if len(strips) == n:
                raise StopException()
        return markdown(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "markdown", clicked)
    return strips


def test_a_click_mid_run_stops_it_and_keeps_the_tokens_so_far(monkeypatch):
    """Streamlit ends a script at the st.* call after a click: here the fourth token's strip meets it."""
    at = page(dec_new=20)
    click_stop_at_strip(monkeypatch, 4)
    at.button(key="dec_generate").click().run()
    monkeypatch.undo()
    at.run()  # the run after the click
    no_errors(at)
    run = kept(at)
    assert run.stop_reason == "stopped" and len(run.steps) == 4
    assert run.new_ids == reference(at).new_ids[:4]
    assert all(step.lens is not None for step in run.steps)  # the lens is read for what was kept
    assert viewer(at)["step"] == 0 and len(records(at)[0]["steps"]) == 4
    assert "Stopped after 4 tokens by a click" in " ".join(c.value for c in at.caption)


def test_a_step_chosen_in_the_viewer_reruns_no_model_and_the_server_parts_follow_it(monkeypatch):
    at = page()
    run = generate(at)
    expected = reference(at)
    blob = records_blob(at)
    header, rows = records(at)
    forward = spy(monkeypatch, type(torch.nn.Module()), "__call__")
    timed = spy(monkeypatch, decoding, "seconds_without_cache")
    for index in (3, 7):
        pick(at, index)
        step = expected.steps[index]
        assert viewer(at)["step"] == index and records_blob(at) == blob  # the same records: a reference, not sent again
        sent = header["steps"][index]
        assert [c["prob"] for c in sent["candidates"]] == pytest.approx([c.prob for c in step.candidates], abs=1e-6)
        assert [c["prob_sampled"] for c in sent["candidates"]] == pytest.approx([c.prob_sampled for c in step.candidates],
                                                                                abs=1e-6)
        layer, head = at.session_state["layer"], at.session_state["head"]
        np.testing.assert_allclose(rows[index][layer][head], step.attention[layer][head].numpy(), atol=payload.QUANTUM)
        assert rows[index][layer].shape[1] == run.steps[index].position
        others = [c.id for c in step.candidates if c.id != step.token.id]
        assert any(m.value.startswith(f"**Branch from step {index}:**") for m in at.markdown)  # its branches
        assert len(pills(at, "dec_branch").options) == len(others)
        assert at.button(key="dec_uncached").label == f"Time step {index} without the cache"
    assert not forward.made  # no module of the model ran for the scrubs
    pick(at, 1, layer=2, head=3)  # the layer and head changed after choosing a step
    assert (viewer(at)["step"], viewer(at)["layer"], viewer(at)["head"]) == (1, 2, 3)
    assert (at.session_state["layer"], at.session_state["head"]) == (2, 3) and records_blob(at) == blob
    assert not forward.made
    pick(at, 7)
    at.button(key="dec_uncached").click().run()  # the server's part follows the step the viewer sent
    no_errors(at)
    assert len(timed.made) == 1 and viewer(at)["step"] == 7
    assert any(f"Step 7 without the cache (all {run.steps[7].position} tokens again)" in m.value for m in at.markdown)


def test_past_the_byte_budget_a_layer_change_brings_that_layer(monkeypatch):
    monkeypatch.setattr(payload, "ALL_LAYERS_BYTES", 1)  # every run is over it: the page's layer only
    at = page()
    run = generate(at)
    pick(at, 4, layer=1, head=2)
    header, rows = records(at)
    assert header["layers"] == [1] and viewer(at)["all_layers"] is False
    pick(at, 4, layer=3)  # a layer change after choosing a step, through the server
    header, rows = records(at)
    assert header["layers"] == [3] and viewer(at)["layer"] == 3
    np.testing.assert_allclose(rows[4][3], run.steps[4].attention[3].numpy(), atol=payload.QUANTUM)


def test_a_branch_continues_on_the_cache_and_equals_a_run_from_scratch():
    at = page()
    run = generate(at)
    pick(at, 2)
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
    strips = [m.value for m in at.markdown if "txviz-strip" in m.value]  # the run's and the branch's, from step 2
    assert len(strips) == 2
    for strip, ids in zip(strips, (run.new_ids, branched.new_ids)):
        numbers = [int(n) for n in re.findall(r"<sub>(\d+)</sub>", strip)]
        assert numbers == list(range(2, len(ids)))  # numbered by the run's steps, as the viewer's pills are


def test_a_click_on_a_candidates_bar_in_the_viewer_branches_from_its_step():
    """What the viewer's branch handler (branches.clicked) leaves for the page: that step, and the branch."""
    at = page()
    run = generate(at)
    pick(at, 1)
    other = next(c for c in run.steps[3].candidates if c.id != run.steps[3].token.id)
    at.session_state["dec_step"] = 3
    at.session_state["_decoding_branch_click"] = (shown_inputs(at), run.new_ids, 3, other.id)
    at.run()
    no_errors(at)
    branched = at.session_state["_decoding_branches"][(shown_inputs(at), run.new_ids, 3, other.id)]
    assert branched.new_ids[:4] == run.new_ids[:3] + (other.id,) and viewer(at)["step"] == 3
    assert pills(at, "dec_branch").value is not None and "_decoding_branch_click" not in at.session_state


def test_a_click_mid_branch_stops_it_and_keeps_its_tokens_so_far(monkeypatch):
    """The branch streams in the page body, outside the step's fragment, so a click reaches it: here the
    branch's third token meets it (Streamlit ends a script at the st.* call after a click)."""
    at = page()
    run = generate(at)
    pick(at, 2)
    other = next(c for c in run.steps[2].candidates if c.id != run.steps[2].token.id)
    click_stop_at_strip(monkeypatch, 3)
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
    said = " ".join(c.value for c in at.caption).replace("\\", "")  # the caption's Markdown escapes
    assert "It was stopped by a click" in said
    # the run's later tokens are not marked against tokens the branch never made
    compared = decoding.compare_branch(run.new_ids[2:], branched.new_ids[2:], run_cut=False, branch_cut=True)
    assert compared.run_compared < len(run.new_ids) - 2
    first, last = 2 + compared.run_compared, len(run.new_ids) - 1
    steps = f"step {first} is" if first == last else f"steps {first}–{last} are"
    assert f"The run's {steps} not compared: the branch was stopped" in said
    run_strip, = [m.value for m in at.markdown if "txviz-strip" in m.value and "<sub>2</sub>" in m.value
                  and m.value.count("<span") == len(run.new_ids) - 2]
    assert run_strip.count(" class=h") == len(compared.run_differ) <= compared.run_compared
    boxes = run_strip.split("<span")[1:]  # the run's tokens past what was compared are greyed, and say why
    greyed = [i for i, box in enumerate(boxes) if box.startswith(" class=g")]
    assert greyed == list(range(compared.run_compared, len(run.new_ids) - 2))
    assert all("not compared: the branch was stopped" in boxes[i] for i in greyed)
    assert not any("not compared" in box for i, box in enumerate(boxes) if i not in greyed)
    branch_strip, = [m.value for m in at.markdown if "txviz-strip" in m.value and "<sub>2</sub>" in m.value
                     and m.value.count("<span") == len(branched.new_ids) - 2]
    assert " class=g" not in branch_strip  # the run was not stopped: every branch token was compared
    at.run()
    assert at.session_state["_decoding_branches"][(inputs, run.new_ids, 2, other.id)] is branched  # not run again
    at.button(key="dec_branch_again").click().run()  # the reader asks for the whole branch after all
    no_errors(at)
    whole = at.session_state["_decoding_branches"][(inputs, run.new_ids, 2, other.id)]
    assert whole.stop_reason != "stopped" and whole.new_ids[:5] == branched.new_ids
    assert len(whole.steps) == N_NEW or whole.stop_reason == "stop_id"
    assert "It was stopped" not in " ".join(c.value for c in at.caption) and "dec_branch_again" not in [b.key for b in at.button]


def test_a_new_seed_or_prompt_never_shows_the_old_generation():
    at = page(dec_sampler="sample", dec_temp=1.5, dec_seed=1)
    first = generate(at)
    pick(at, 5)
    first_run_id = viewer(at)["run_id"]
    at.number_input(key="dec_seed").set_value(2).run()
    no_errors(at)
    assert kept(at) is None and not at.get("plotly_chart") and viewer(at) is None  # nothing shown until Generate
    second = generate(at)
    assert second.new_ids == reference(at).new_ids != first.new_ids
    assert viewer(at)["step"] == 0 and viewer(at)["run_id"] != first_run_id  # the new run, from its first step
    assert [s["token"]["id"] for s in records(at)[0]["steps"]] == list(second.new_ids)
    at.session_state["prompt"] = sample_text(5)
    at.run()
    assert kept(at) is None and not at.get("plotly_chart") and viewer(at) is None
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
    pick(at, len(run.steps) - 1, layer=0)
    step = run.steps[-1]
    header, rows = records(at)
    assert header["windows"][0] == 8 and header["windows"][5] is None  # the viewer shades layer 0's cut
    head = at.session_state["head"]
    row = step.attention[0][head]
    assert float(row[:step.query_position - 8 + 1].abs().max()) == 0.0  # the keys beyond the window get nothing
    assert rows[-1][0][head][:step.query_position - 8 + 1].max() == 0.0
    measured, formula = header["steps"][-1]["kv"], header["steps"][-1]["formula"]
    assert measured == formula
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
    pick(at, 2)
    no_errors(at)
    assert chart(at, "dec_lens_strip")["data"][0]["y"][2].endswith(payload.label(run.steps[2].token.text, run.new_ids[2]))


def test_a_step_is_timed_without_the_cache_once_on_a_click(monkeypatch):
    at = page()
    generate(at)
    pick(at, 4)
    assert not any("without the cache (all" in m.value for m in at.markdown)
    timed = spy(monkeypatch, decoding, "seconds_without_cache")
    at.button(key="dec_uncached").click().run()
    no_errors(at)
    assert len(timed.made) == 1 and timed.last > 0
    assert any(f"without the cache (all {kept(at).steps[4].position} tokens again)" in m.value for m in at.markdown)
    at.run()
    assert "dec_uncached" not in [b.key for b in at.button] and len(timed.made) == 1  # measured once
    pick(at, 5)
    assert "dec_uncached" in [b.key for b in at.button] and len(timed.made) == 1


def test_a_run_stopped_before_its_first_token_says_so(monkeypatch):
    at = page()
    monkeypatch.setattr(decoding, "run", lambda loaded, inputs, ids, **kwargs: decode(
        loaded.model, ids, inputs.max_new_tokens, should_stop=lambda: True))
    generate(at)
    assert any("stopped before its first token" in i.value for i in at.info) and not at.get("plotly_chart")
    assert viewer(at) is None


def test_the_viewer_comes_with_a_few_sentences_on_each_of_its_charts():
    at = page()
    assert not any("Reading a step" in c.value for c in at.caption)  # nothing to read before a run
    generate(at)
    said = next(c.value for c in at.caption if c.value.startswith("**Reading a step.**"))
    for chart in ("Top next tokens", "Layer, head", "KV cache per layer", "Every head"):  # the viewer's chart titles
        assert f"*{chart}*" in said
    for part in ("dashed line", "outlined", "branches", "sliding window", "formula"):  # what each mark means
        assert part in said
