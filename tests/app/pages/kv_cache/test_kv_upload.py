"""The memory calculator's upload through AppTest, for configs of families txviz cannot run: Gemma 3
(sliding windows on 5 of 6 layers), DeepSeek-V3 (MLA and 256 experts), a family it does not know (the
generic rule's warning) and one missing numbers; every number shown is checked against arithmetic on
the published config (tests/helpers/published_geometry_configs.py), and the attention-kind choice is
checked to follow each new upload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from app.ui.widgets import plain
from tests.helpers.apptest import open_at

ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")
GIB = 1 << 30


@pytest.fixture
def upload_page():
    """The KV page on the zoo's tiny model (the calculator runs no model), the upload chosen."""
    from txviz.lab.corpus import sample_text

    at = open_at("kv_cache", ZOO_BASE, sample_text(3), timeout=300, state={"mem_source": "Your config.json"})
    no_errors(at)
    assert widget(at, "radio", "mem_source").value == "Your config.json" and at.file_uploader
    return at


def no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def widget(at, kind: str, key: str):
    return next(w for w in at.get(kind) if w.key == key)


def upload(at, config: dict, name: str = "config.json"):
    at.file_uploader[0].set_value((name, json.dumps(config).encode(), "application/json")).run()
    return at


def metric(at, starts: str) -> tuple[str, str]:
    return next((m.label, m.value) for m in at.metric if m.label.startswith(starts))


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def kib(n_bytes: int) -> str:
    return f"{n_bytes / 1024:,.1f} KiB"


def test_gemma3_and_deepseek_v3_uploads_show_their_own_numbers(upload_page):
    at = upload(upload_page, pub.GEMMA_3_270M)
    no_errors(at)
    assert metric(at, "KV bytes per token") == ("KV bytes per token (MQA)", kib(18 * 2 * 1 * 256 * 2))
    text = captions(at)
    assert "sliding window 512 on 15 of 18 layers" in text and "0.27 B parameters" in text
    weights, kv = 2 * 268_098_176, (3 * 32768 + 15 * 512) * 2 * 256 * 2  # at its context, 32,768 tokens
    assert f"At 32,768 tokens: weights {weights / GIB:,.2f} GiB + KV cache {kv / GIB:,.2f} GiB" in text

    at = upload(at, pub.DEEPSEEK_V3)
    assert not at.exception
    assert metric(at, "KV bytes per token") == ("KV bytes per token (MLA)", kib(61 * (512 + 64) * 2))
    assert widget(at, "segmented_control", "mem_kind").options == ["MLA"]
    assert metric(at, "Longest context") == ("Longest context that fits (all three)", "none")
    assert f"The weights alone ({2 * 671_026_404_352 / GIB:,.1f} GiB in bf16) do not fit" in at.warning[0].value
    text = captions(at)
    assert "256 experts, 8 per token (671.0 B parameters held, 37.6 B run per token)" in text
    assert "a 512-wide latent + a 64-wide RoPE key" in text


def test_gemma3_multimodal_upload_reads_the_text_model_and_says_so(upload_page):
    at = upload(upload_page, pub.GEMMA_3_4B_IT)
    no_errors(at)
    assert metric(at, "KV bytes per token") == ("KV bytes per token (GQA)", kib(34 * 2 * 4 * 256 * 2))
    assert "vision tower is not counted" in captions(at) and "on 29 of 34 layers" in captions(at)


def test_changing_the_upload_after_choosing_mqa_follows_each_new_model(upload_page):
    at = upload(upload_page, hf.MIXTRAL_8X7B)
    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()
    no_errors(at)
    assert metric(at, "KV bytes per token") == ("KV bytes per token (MQA)", kib(32 * 2 * 1 * 128 * 2))

    at = upload(at, pub.FALCON_40B)  # another GQA model: its own kind, not the MQA chosen before
    no_errors(at)
    assert metric(at, "KV bytes per token") == ("KV bytes per token (GQA)", kib(60 * 2 * 8 * 64 * 2))
    assert widget(at, "segmented_control", "mem_kind").value == "GQA"

    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()
    at = upload(at, pub.DEEPSEEK_V3)  # MLA offers no MQA: the choice goes
    assert not at.exception
    assert metric(at, "KV bytes per token") == ("KV bytes per token (MLA)", kib(61 * 576 * 2))

    at = upload(at, pub.GEMMA_3_270M)  # MQA is this model's own kind
    no_errors(at)
    assert metric(at, "KV bytes per token") == ("KV bytes per token (MQA)", kib(18 * 2 * 256 * 2))
    assert widget(at, "segmented_control", "mem_kind").value == "MQA"


def test_an_unknown_family_is_sized_with_a_warning_and_missing_numbers_are_named(upload_page):
    unknown = {**hf.LLAMA_3_8B, "model_type": "acme_lm", "architectures": ["AcmeForCausalLM"]}
    at = upload(upload_page, unknown)
    assert not at.exception and not at.error
    assert metric(at, "KV bytes per token") == ("KV bytes per token (GQA)", kib(32 * 2 * 8 * 128 * 2))
    assert any("generic rule" in w.value and plain("'acme_lm' is not one txviz knows") in w.value for w in at.warning)

    at = upload(at, {"model_type": "acme_lm", "hidden_size": 4096})
    assert not at.exception and not at.metric
    assert plain("num_hidden_layers") in at.error[0].value and plain("vocab_size") in at.error[0].value


def test_an_uploaded_name_is_shown_as_written_not_as_markdown(upload_page):
    """``_name_or_path`` was once rendered bold with a live link; the caption's Markdown now holds
    it escaped (rendered as written: tests/app/ui/test_plain_text.py), and so does the file's name."""
    hostile = "<img src=x onerror=alert(1)> **bold** [link](http://x)"
    at = upload(upload_page, {**hf.LLAMA_3_8B, "_name_or_path": hostile}, name="*my* [config](http://y).json")
    no_errors(at)
    text = captions(at)
    assert f"**{plain('x) (')}" in text  # the name: the last part of the path, then the size
    assert plain(f"uploaded file *my* [config](http://y).json ({hostile})") in text
    [line] = [c.value for c in at.caption if "uploaded file" in c.value]
    rendered = MarkdownIt("commonmark").render(line)  # Streamlit's renderer is CommonMark (+ GFM)
    assert rendered.count("<strong>") == 1 and "<a " not in rendered and "<img" not in rendered, rendered
