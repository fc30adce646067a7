"""The Heads page's Circuit tab through AppTest, on the zoo's tiny base_long (word-level vocabulary, fast):
nothing runs before the click, the graph draws, the slider changes the measured faithfulness, a new prompt
pair never shows the old graph, the breakdown's pairs add up to the model's score."""

from __future__ import annotations

import pytest

from app.services.zoo import zoo_path
from tests.helpers.apptest import chart, chart_ids, no_errors, open_at, texts

CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"


@pytest.fixture(autouse=True)
def fresh_stores():
    from app import cache

    cache._shared.clear()
    yield
    cache._shared.clear()


def circuit_tab():
    at = open_at("heads", model=str(zoo_path("base_long")), state={"heads_tab": "Circuit"})
    at.text_input(key="circuit_clean").input(CLEAN)
    at.text_input(key="circuit_corrupt").input(CORRUPT)
    at.text_input(key="circuit_answer").input("Mary")
    at.text_input(key="circuit_wrong").input("John").run()
    no_errors(at)
    return at


def graph_ids(at) -> list[str]:
    return [k.rpartition("-")[2] for k in chart_ids(at) if "circuit_graph_" in k]


def measured(at) -> str:
    return next(m.value for m in at.metric if m.label == "Measured faithfulness")


def test_the_graph_draws_after_the_click_and_the_slider_measures_each_circuit():
    at = circuit_tab()
    assert not graph_ids(at) and "forward passes" in texts(at)  # the estimate, and nothing run yet
    at.button(key="circuit_run").click().run()
    no_errors(at)
    [graph] = graph_ids(at)
    figure = chart(at, graph)
    assert any(trace.get("name") == "nodes" for trace in figure["data"])
    slider = next(s for s in at.select_slider if s.key and s.key.startswith("circuit_edges_"))
    options = [int(o) for o in slider.options]
    at.select_slider(key=slider.key).set_value(options[-1]).run()
    assert float(measured(at)) == pytest.approx(1.0, abs=1e-3)  # every edge clean: the clean run
    curve = next(t for t in chart(at, "circuit_curve_")["data"] if t.get("name") == "curve")
    for n, value in zip(curve["customdata"][1:-1], curve["y"][1:-1]):  # the curve's own sizes, measured again
        at.select_slider(key=slider.key).set_value(int(n)).run()
        assert float(measured(at)) == pytest.approx(value, abs=1e-3)
    assert len({round(v, 3) for v in curve["y"]}) > 2  # the sizes differ in faithfulness: the check can fail
    at.select_slider(key=slider.key).set_value(options[0]).run()
    lines = [t for t in chart(at, graph)["data"] if t.get("mode") == "lines"]
    assert sum(len([x for x in t["x"] if x is None]) for t in lines) == options[0]  # one segment per edge


def test_a_new_prompt_pair_never_shows_the_old_graph():
    at = circuit_tab()
    at.button(key="circuit_run").click().run()
    assert graph_ids(at)
    at.text_input(key="circuit_corrupt").input("Mary gave the book to John. John gave it back from").run()
    no_errors(at)
    assert not graph_ids(at) and at.button(key="circuit_run")  # asks to run the new pair instead
    at.text_input(key="circuit_corrupt").input(CORRUPT).run()
    assert graph_ids(at)  # the first pair's run is kept for it


def test_the_breakdown_adds_up_to_the_model_s_score():
    at = circuit_tab()
    at.button(key="circuit_run").click().run()
    values = {m.label: float(m.value) for m in at.metric if m.label in ("Pre-softmax score (the model's)",
                                                                         "Sum of the pairs")}
    assert len(values) == 2 and values["Sum of the pairs"] == pytest.approx(values["Pre-softmax score (the model's)"],
                                                                             abs=2e-4)
    at.number_input(key=next(n.key for n in at.number_input if n.key.startswith("circuit_layer_"))).set_value(1).run()
    no_errors(at)
    assert any("circuit_qk_" in k for k in chart_ids(at))


def test_a_pair_of_unequal_length_is_refused_before_any_run():
    at = circuit_tab()
    at.text_input(key="circuit_corrupt").input(CORRUPT + " him").run()
    assert "same token count" in texts(at) and not graph_ids(at)


def test_opening_a_head_shows_it_on_the_attention_page_with_the_clean_prompt():
    at = circuit_tab()
    at.button(key="circuit_run").click().run()
    suffix = next(n.key for n in at.number_input if n.key.startswith("circuit_layer_")).removeprefix("circuit_layer_")
    at.number_input(key=f"circuit_layer_{suffix}").set_value(2).run()
    at.number_input(key=f"circuit_head_{suffix}").set_value(3).run()
    at.button(key=f"circuit_open_{suffix}").click().run()
    no_errors(at)
    assert at.session_state["prompt"] == CLEAN
    assert (at.session_state["layer"], at.session_state["head"]) == (2, 3)
    assert "Attention" in [t.value for t in at.title]
