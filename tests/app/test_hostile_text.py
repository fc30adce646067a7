"""Text from a visitor, a link, a file or the model renders as text on every page: hostile Markdown, HTML,
bare URLs and e-mail addresses fed through every way in (the sidebar's prompt and model, the Heads page's
sentence, completion, counterfactual and swapped word, an uploaded config's name and file name, the
Attention page's second prompt; the tokens, words, answers and errors made from them) reach no live link,
image, tag, emphasis, math or directive in any Markdown field, HTML element or plotly figure of any tab.
The default model's byte-level tokenizer keeps every character, so its tokens carry the hostile pieces."""

from __future__ import annotations

import json

import pytest

from tests.helpers.apptest import PAGE_NAMES, aim_at, app_on, has_chart
from tests.helpers.markup_scan import live_markdown, scan

pytestmark = pytest.mark.default_model

HOSTILE = ("[LNK](http://evil.example/a) ![IMG](http://evil.example/i.png) <b>HTM</b> *EMX* __EMY__ "
           "http://evil.example/bare www.evil.example evil@evil.example $MTH$ :red[DIR] \u202eRTL")
MARKERS = ("evil", "HTM", "LNK", "IMG", "EMX", "EMY", "MTH", "DIR")
# the Heads page's sentence and completion: short, since the causal test runs the model once per head
SENTENCE = "The trophy did not fit in the suitcase because it was too big [LNK](http://evil.example/a)"
COMPLETION = " *EMX* www.evil.example The thing that was too big was the"
TABS = {"heads": "heads_tab", "kv_cache": "kv_tab", "moe": "moe_tab", "tradeoffs": "tradeoffs_tab",
        "positions": "positions_tab_rope"}
UPLOADS = {"kv_cache": ("mem_source", "Your config.json", "mem_upload"),
           "tradeoffs": (None, None, "to_kinds_upload")}
CONFIG = {"_name_or_path": HOSTILE, "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
          "max_position_embeddings": 256}


@pytest.fixture
def hostile_env(monkeypatch, default_model_home):
    for name in ("TXVIZ_MAX_TOKENS", "TXVIZ_MAX_LONG_TOKENS", "TXVIZ_MEMORY_BUDGET", "TXVIZ_MODEL_DIRS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))


def test_hostile_text_renders_as_text_on_every_page_and_tab(hostile_env):
    assert {kind.split()[0] for kind in live_markdown(HOSTILE)} >= {  # the scan sees each kind unescaped
        "link_open", "image", "html_inline", "autolink", "emphasis", "math", "directive"}
    found: dict[str, list[str]] = {}

    def check(at, where: str) -> None:
        assert not at.exception, (where, [e.value for e in at.exception])
        found.update({where: problems} if (problems := scan(at, MARKERS)) else {})

    at = app_on(model=f"models/{HOSTILE}.gguf", prompt=HOSTILE, timeout=300)
    at.query_params["coref_text"] = SENTENCE
    at.run()
    check(at, "a link's model and prompt")
    for page in PAGE_NAMES:
        at = aim_at(at, page)
        at.run()
        check(at, page)
        if page == "attention":
            at.session_state["pair_open"] = True
            at.run()
            at.text_input(key="pair_prompt").input(HOSTILE[::-1]).run()
            check(at, "attention: a second prompt")
        tabs = [tab.label for tab in at.tabs] if page in TABS else []
        for label in tabs:
            at.session_state[TABS[page]] = label
            at.run()
            check(at, f"{page} / {label}")
            _feed_tab(at, page, label, check)
    assert not found, json.dumps(found, indent=1, ensure_ascii=False)


def _feed_tab(at, page: str, label: str, check) -> None:
    """Type or upload the hostile text into the open tab's own fields, run what a click runs."""
    where = f"{page} / {label}"
    if page == "heads" and label == "Coreference":
        _type(at, "Completion", f"{where}: the completion", check, COMPLETION, keep=False)
        clean = next(f.value for f in at.text_input if f.label.startswith("Sentence + completion"))
        next(f for f in at.text_input if f.label.startswith("Counterfactual")).input(
            clean.replace("too big", "too small")).run()  # the same token count: patching can run
        run = [b for b in at.button if b.key == "causal_run"]
        assert run, ("the Coreference tab offered no causal test", [w.value for w in at.warning])
        run[0].click().run(timeout=900)
        check(at, f"{where}: the causal test")
        assert has_chart(at, "causal_residual"), "the causal test showed no result"
        _type(at, "Counterfactual", f"{where}: the counterfactual", check)
        _type(at, "Check it", f"{where}: the swapped word", check)
    if page in UPLOADS:
        source_key, source, upload_key = UPLOADS[page]
        if source_key:
            at.session_state[source_key] = source
            at.run()
        uploaders = [u for u in at.get("file_uploader") if u.key == upload_key]
        if uploaders:
            uploaders[0].set_value((f"{HOSTILE}.json", json.dumps(CONFIG).encode(), "application/json")).run()
            check(at, f"{where}: an uploaded config")
            assert any("evil" in e.value for e in at.caption), "the uploaded config's name was not shown"


def _type(at, label: str, where: str, check, text: str = HOSTILE, keep: bool = True) -> None:
    """Put ``text`` in the text field of ``label`` (before what it holds, if ``keep``)."""
    field = next((f for f in at.text_input if f.label.startswith(label)), None)
    if field is not None:
        field.input(text + (" " + field.value if keep else "")).run()
        check(at, where)
