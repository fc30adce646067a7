"""The Heads page's Coreference tab and Detectors tab through AppTest on the default model: the marks
follow the sentence, the causal story, the query position, the model's own answer, the sentence in
the URL; the duplicate-token detector on a prompt with no repeated token."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import MAIN, aim_at, assert_opened, chart, has_chart, no_errors, shown, texts
from txviz.analysis.coref.answer import model_answer, sentence_words

pytestmark = pytest.mark.default_model

TROPHY = "The trophy didn't fit in the suitcase because it was too big."


@pytest.fixture
def app(default_model_home, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    return AppTest.from_file(MAIN, default_timeout=300)


def heads_page(at, tab: str | None = "Coreference"):
    """Open the Heads page as a link to it does, on ``tab`` as a click on it shows it (only the open tab is
    computed; None: the tab it opens on). One run: no run of the Attention page, nor of the Detectors tab,
    first (tests/helpers/apptest.open_at)."""
    aim_at(at, "heads")
    if tab is not None:
        at.session_state["heads_tab"] = tab
    at.run()
    assert_opened(at, "heads")
    no_errors(at)
    return at


def strip(at, name: str):
    """The pills strip ``coref_<name>_<sentence hash>``."""
    found = [w for w in at.get("button_group") if w.key and w.key.startswith(f"coref_{name}_")]
    assert len(found) == 1, [w.key for w in at.get("button_group")]
    return found[0]


def marked(at) -> tuple[str, list[str]]:
    """(pronoun, candidates) as the strips show them, read through their options' labels."""
    pronoun, candidates = strip(at, "pronoun"), strip(at, "candidates")
    return pronoun.format_func(pronoun.value), [candidates.format_func(i) for i in candidates.value]


def headline(at) -> str:
    lines = [m.value for m in at.markdown if "heads**" in m.value]
    assert len(lines) == 1, lines
    return lines[0]


def new_sentence(at, text: str):
    at.text_input(key="coref_text").input(text).run()
    no_errors(at)
    return at


def test_a_new_sentence_gets_its_own_marks_and_headline(app):
    """The defaults of the old sentence (she, Mary, John) must not carry over."""
    at = heads_page(app)
    assert "from *she*" in headline(at) and "on *Mary*" in headline(at)
    new_sentence(at, TROPHY)
    assert "from *it*" in headline(at) and "on *trophy*" in headline(at), headline(at)
    assert marked(at) == ("it", ["trophy", "suitcase"])
    assert at.dataframe[0].value["→ trophy"].notna().all()


def test_marks_chosen_by_hand_are_reset_by_a_new_sentence(app):
    at = heads_page(app)
    words = [w.text for w in sentence_words(at.text_input(key="coref_text").value)]
    strip(at, "pronoun").set_value(words.index("him")).run()
    strip(at, "candidates").set_value([words.index("Mary"), words.index("John"), words.index("station")]).run()
    no_errors(at)
    assert marked(at) == ("him", ["Mary", "John", "station"])
    assert "from *him*" in headline(at)
    assert list(at.dataframe[0].value.columns[-3:]) == ["→ Mary", "→ John", "→ station"]

    new_sentence(at, TROPHY)
    assert marked(at) == ("it", ["trophy", "suitcase"])
    assert "from *it*" in headline(at) and "on *trophy*" in headline(at)
    assert list(at.dataframe[0].value.columns[-2:]) == ["→ trophy", "→ suitcase"]
    completion = next(t for t in at.text_input if t.key.startswith("coref_completion_"))
    assert completion.value == " The thing that was too big was the"


SMILED = "Mary met John and she smiled."  # README's coreference file example: gender decides, before "she"
NO_HEAD = "no head can know the answer"


def deciding_marked(at) -> list[str]:
    deciding = strip(at, "deciding")
    value = deciding.value
    return [] if value is None else [deciding.format_func(value)]


def test_a_deciding_word_is_suggested_only_for_a_known_contrast_and_a_mark_does_not_outlive_its_sentence(app):
    """Once "smiled" was marked as deciding and the page said no head at "she" can know the answer."""
    at = new_sentence(heads_page(app), SMILED)
    assert deciding_marked(at) == [] and NO_HEAD not in texts(at)
    assert "agreement (gender, number) can decide there" in texts(at)
    assert "from *she*" in headline(at) and "on *Mary*" in headline(at)
    new_sentence(at, TROPHY)  # the canonical pair: "big" comes after "it" and decides it
    assert deciding_marked(at) == ["big"] and "At “it” no head can know the answer" in texts(at)
    strip(at, "deciding").set_value(None).run()  # the reader removes the mark...
    no_errors(at)
    assert NO_HEAD not in texts(at)
    new_sentence(at, SMILED)
    words = [w.text for w in sentence_words(SMILED)]
    strip(at, "deciding").set_value(words.index("smiled")).run()  # ...or marks a word by hand: their claim
    no_errors(at)
    assert "At “she” no head can know the answer" in texts(at)
    new_sentence(at, TROPHY)  # marks of a sentence left are forgotten: the trophy's suggestion again
    assert deciding_marked(at) == ["big"]
    new_sentence(at, "Anna called Peter because she needed help.")  # a new sentence: no mark carried over
    assert deciding_marked(at) == [] and NO_HEAD not in texts(at)
    assert "from *she*" in headline(at)


def test_candidates_after_the_pronoun_are_refused_and_nothing_of_the_last_sentence_stays(app):
    """Once "When she finally arrived, Mary thanked John" ranked all 270 heads on margins of 0."""
    at = heads_page(app)
    assert "from *she*" in headline(at) and at.dataframe and at.metric and has_chart(at, "coref_grid")
    cataphora = "When she finally arrived, Mary thanked John for waiting."
    new_sentence(at, cataphora)
    assert marked(at) == ("she", [])  # no noun before "she": nothing suggested
    words = [w.text for w in sentence_words(cataphora)]
    strip(at, "candidates").set_value([words.index("Mary"), words.index("John")]).run()
    no_errors(at)
    assert "Cannot rank with these choices: “Mary” and “John” come after “she”." in texts(at)
    assert "cannot see a later word" in texts(at)
    assert not [m for m in at.markdown if "heads**" in m.value] and not at.dataframe and not at.metric
    assert not [t for t in at.text_input if t.key.startswith(("coref_completion_", "causal_"))]
    assert not has_chart(at, "coref_grid") and not at.get("plotly_chart")
    said = "Mary said that she saw John."  # one before, one after
    new_sentence(at, said)
    words = [w.text for w in sentence_words(said)]
    strip(at, "candidates").set_value([words.index("Mary"), words.index("John")]).run()
    no_errors(at)
    assert "“John” comes after “she” and only “Mary” before it." in texts(at) and not at.dataframe


def test_causal_story_query_position_and_the_models_answer(app, default_model):
    at = new_sentence(heads_page(app), TROPHY)
    page = texts(at)
    assert "At “it” no head can know the answer" in page
    assert "the largest difference of any of the 270 heads' attention at “it” is 0." in page  # big vs small
    labels = [m.label for m in at.metric]
    assert labels[:2] == ["trophy (token “ trophy”)", "suitcase (token “ suit”)"]
    completion = " The thing that was too big was the"
    answer = model_answer(default_model, TROPHY, completion, ["trophy", "suitcase"])
    shown = [float(m.value.split("%")[0]) / 100 for m in at.metric[:2]]
    assert shown == pytest.approx(answer.p_candidates, abs=0.0006)
    assert [float(m.proto.delta.split("%")[0]) / 100 for m in at.metric[:2]] == pytest.approx(answer.p_vocab,
                                                                                               abs=0.00006)
    assert f"the candidates together get only {sum(answer.p_vocab):.1%} of the next token" in texts(at)
    query = next(r for r in at.radio if r.key.startswith("coref_query_"))
    assert query.options == ["the pronoun", "the deciding word", "the completion's end"]
    query.set_value("deciding word").run()
    no_errors(at)
    assert "from *big*" in headline(at)
    next(r for r in at.radio if r.key.startswith("coref_query_")).set_value("completion end").run()
    no_errors(at)
    assert "from *the*" in headline(at)

    edited = next(t for t in at.text_input if t.key.startswith("coref_completion_"))
    edited.input(" So the big one was the").run()  # the user's own completion: another answer
    no_errors(at)
    mine = model_answer(default_model, TROPHY, " So the big one was the", ["trophy", "suitcase"])
    assert [float(m.value.split("%")[0]) / 100 for m in at.metric[:2]] == pytest.approx(mine.p_candidates, abs=6e-4)


def test_the_proposed_counterfactual_flips_the_answer(app, default_model):
    """Swapping the names ("John met Mary …, and she …") once left "she" meaning Mary."""
    at = new_sentence(heads_page(app), SMILED)
    clean = next(t for t in at.text_input if t.key.startswith("causal_clean_")).value
    corrupt = next(t for t in at.text_input if t.key.startswith("causal_corrupt_"))
    assert corrupt.value == clean.replace("she", "he") and "“she” replaced by “he”" in corrupt.label
    names = ["Mary", "John"]
    preferred = [names[max(range(2), key=model_answer(default_model, text, "", names).p_candidates.__getitem__)]
                 for text in (clean, corrupt.value)]
    assert preferred == ["Mary", "John"]  # measured on SmolLM2: Mary 65.6 %, then John 54.7 % of the two
    new_sentence(at, TROPHY)  # a known contrast: big ⇄ small
    assert "“big” replaced by “small”" in next(t for t in at.text_input if t.key.startswith("causal_corrupt_")).label
    strip(at, "deciding").set_value(None).run()  # "it" has no other gender: the names, and what that tests
    no_errors(at)
    label = shown(next(t for t in at.text_input if t.key.startswith("causal_corrupt_")).label)
    assert "swapped" in label and "tests name order, not the answer" in label


def test_ranking_for_another_answer_and_the_builtin_set(app, monkeypatch):
    """Also the library's figures on SmolLM2 (txviz.analysis.coref.ranking.evaluate on the built-in set with
    the sink token): the one evaluation the page runs is the one checked, not a second of its own (~5 s)."""
    from app.services import heads

    evaluated = []
    evaluate = heads.coref_evaluation
    monkeypatch.setattr(heads, "coref_evaluation",
                        lambda loaded, bos, progress=None: evaluated.append((bos, evaluate(loaded, bos, progress))) or evaluated[-1][1])
    at = heads_page(app)
    ranking = at.dataframe[0].value
    assert len(ranking) == 15 and list(ranking.columns[:4]) == ["layer", "head", "margin", "predicts"]
    assert ranking["margin"].is_monotonic_decreasing
    assert ranking["predicts"].iloc[0] == "Mary"  # the best head for "she" → Mary does prefer Mary
    target = next(r for r in at.radio if r.key.startswith("coref_target_"))
    target.set_value(1).run()  # rank for John instead: another order
    no_errors(at)
    assert at.dataframe[0].value["predicts"].iloc[0] == "John"
    at.button(key="coref_builtin").click().run()
    no_errors(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Nearest-candidate baseline"] == "50.0%"
    best = next(m for m in at.metric if m.label == "Best head")
    assert float(best.proto.delta.split()[-1].rstrip("%")) > 80.0
    assert best.proto.direction == best.proto.MetricDirection.NONE  # its score, not a change: no arrow
    [(bos, result)] = evaluated  # computed once, for the sidebar's default: the sink token
    assert bos == "sink" and best.value == f"L{result['heads'][0]['layer']} H{result['heads'][0]['head']}"
    assert_default_model_has_coreference_heads(result)


def assert_default_model_has_coreference_heads(result: dict) -> None:
    """SmolLM2 on the built-in set (moved from tests/analysis/coref/test_coref.py, which evaluated it again):
    every one of its 30 x 9 heads scored and sorted, the baselines at chance, a head well above them."""
    from txviz.analysis.coref.ranking import builtin_cases

    assert set(result) >= {"n_cases", "baselines", "heads"} and result["n_cases"] == len(builtin_cases())
    assert result["baselines"] == {"nearest": 0.5, "first": 0.5}
    heads = result["heads"]
    assert sorted((r["layer"], r["head"]) for r in heads) == [(l, h) for l in range(30) for h in range(9)]
    assert [(-r["accuracy"], -r["margin"]) for r in heads] == sorted((-r["accuracy"], -r["margin"]) for r in heads)
    best = heads[0]
    assert best["accuracy"] >= 0.8 and best["margin"] > 0.1  # measured: layer 9 head 4, 0.94 and 0.28


def test_a_sentence_without_a_pronoun_or_with_too_few_marks_says_what_to_click(app):
    at = new_sentence(heads_page(app), "Paris is the capital of France.")
    assert strip(at, "pronoun").value is None and any("Click the pronoun" in i.value for i in at.info)
    assert not [m for m in at.markdown if "heads**" in m.value]
    new_sentence(at, TROPHY)
    strip(at, "candidates").set_value([1]).run()  # one candidate only
    no_errors(at)
    assert any("at least two candidate words" in i.value for i in at.info)
    strip(at, "candidates").set_value([1, 6]).run()
    strip(at, "deciding").set_value(None).run()  # no deciding word: its query position is not offered
    no_errors(at)
    assert next(r for r in at.radio if r.key.startswith("coref_query_")).options == ["the pronoun",
                                                                                     "the completion's end"]
    assert "from *it*" in headline(at)


def test_the_sentence_is_kept_in_the_url(app):
    app.query_params["coref_text"] = TROPHY
    at = heads_page(app, tab=None)  # a link that carries a sentence opens on the Coreference tab
    assert at.text_input(key="coref_text").value == TROPHY
    assert "from *it*" in headline(at)
    new_sentence(at, "Anna called Peter because she needed help.")
    assert at.query_params["coref_text"] in ("Anna called Peter because she needed help.",
                                             ["Anna called Peter because she needed help."])


def test_duplicate_token_detector_says_when_no_token_repeats(app):
    at = heads_page(app, tab=None)  # the Detectors tab, open by default; the default prompt: no token occurs twice
    assert not has_chart(at, "det_dup")
    assert any("no token repeats in this prompt" in i.value for i in at.info)
    at.sidebar.text_area(key="prompt").input("the cat saw the cat").run()
    no_errors(at)
    assert chart(at, "det_dup")["data"][0]["z"]
    assert not any("no token repeats" in i.value for i in at.info)


def test_only_the_open_tab_is_computed_and_the_marks_survive_a_visit_to_the_other(app):
    at = heads_page(app, tab=None)
    assert has_chart(at, "det_prev") and not has_chart(at, "coref_grid")  # Detectors: no coreference work
    at.session_state["heads_tab"] = "Coreference"
    at.run()
    assert has_chart(at, "coref_grid") and not has_chart(at, "det_prev")
    words = [w.text for w in sentence_words(at.text_input(key="coref_text").value)]
    strip(at, "pronoun").set_value(words.index("him")).run()
    at.session_state["heads_tab"] = "Detectors"
    at.run()
    no_errors(at)
    at.session_state["heads_tab"] = "Coreference"
    at.run()
    no_errors(at)
    assert marked(at)[0] == "him" and "from *him*" in headline(at)
