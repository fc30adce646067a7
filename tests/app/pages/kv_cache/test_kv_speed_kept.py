"""The cached vs uncached timing is shown only beside the model, prompt and settings it was measured on
(SmolLM2's chart once stayed under Gemma and under a new prompt); on two zoo models."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.apptest import has_chart, no_errors, open_at, pick_model, texts

ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")


def zoo_prompt(index: int) -> str:
    """A prompt the zoo's vocabulary knows (the default prompt's unknown words would add a warning)."""
    from txviz.lab.corpus import sample_text

    return sample_text(index)


def measure(at):
    at.button(key="kv_measure").click().run()
    no_errors(at)
    assert has_chart(at, "kv_speed")
    return at


def test_a_timing_is_not_shown_under_another_model_or_prompt():
    at = open_at("kv_cache", model=ZOO_BASE, prompt=zoo_prompt(3), timeout=300, state={"kv_tab": "Cached vs uncached"})
    no_errors(at)
    at.slider(key="kv_speed_tokens").set_value(8).run()
    measure(at)
    pick_model(at, "mha").run()  # another zoo model in the sidebar
    no_errors(at)
    assert not has_chart(at, "kv_speed")
    assert "The last measurement was for another model:" in texts(at)
    measure(at)  # on mha
    at.sidebar.text_area(key="prompt").input(zoo_prompt(4)).run()
    no_errors(at)
    assert not has_chart(at, "kv_speed")
    assert "The last measurement was for another prompt:" in texts(at)
    at.slider(key="kv_speed_tokens").set_value(9).run()
    assert "for another prompt, 8 tokens to generate:" in texts(at)
    at.slider(key="kv_speed_tokens").set_value(8).run()
    at.sidebar.text_area(key="prompt").input(zoo_prompt(3)).run()
    assert has_chart(at, "kv_speed")  # back on what it was measured on: shown again


def test_a_timing_ended_by_a_click_says_where_it_stopped():
    # the mark a timing leaves while it runs is what a click that ends it leaves behind (the click itself is
    # chromium's: a Stop ended the timing and the tab then showed nothing at all, as if Measure did nothing)
    at = open_at("kv_cache", model=ZOO_BASE, prompt=zoo_prompt(3), timeout=300, state={"kv_tab": "Cached vs uncached"})
    at.slider(key="kv_speed_tokens").set_value(8).run()
    measured = measure(at).session_state["_running_kv_measure"] if "_running_kv_measure" in at.session_state else None
    assert measured is None  # a finished timing leaves no mark
    at.session_state["_running_kv_measure"] = {"run": "recompute everything", "token": 3, "of": 8}
    at.run()
    no_errors(at)
    notes = " ".join(i.value for i in at.info)
    assert "Stopped during “recompute everything”, at token 3 of 8; nothing partial was kept." in notes
    at.run()
    assert not any("Stopped during" in i.value for i in at.info)  # said once
