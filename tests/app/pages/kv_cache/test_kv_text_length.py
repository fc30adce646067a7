"""The sharing tab says how many tokens of the shipped text it measured when the text gives fewer than
asked (Gemma reads it as 987 tokens at "1000"); the zoo's base model holds 128."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.apptest import no_errors, open_at, texts

ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")


def tokens_run(asked: int) -> tuple[int, int]:
    """(tokens of the shipped text the zoo's base model runs at ``asked``, its context), from the library."""
    from app.services.texts import shipped_text_ids, shipped_texts
    from txviz.loading import load

    loaded = load(ZOO_BASE)
    return len(shipped_text_ids(loaded, next(iter(shipped_texts())), asked)), loaded.config.max_seq_len


def test_a_count_past_the_context_says_how_many_tokens_were_measured():
    from txviz.lab.corpus import sample_text

    at = open_at("kv_cache", model=ZOO_BASE, prompt=sample_text(3), timeout=300, state={"kv_tab": "Sharing KV heads"})
    at.select_slider(key="live_tokens").set_value(128).run()
    no_errors(at)
    assert "Measured on **" not in texts(at)  # all 128 asked for were run
    at.select_slider(key="live_tokens").set_value(512).run()
    no_errors(at)
    used, context = tokens_run(512)
    assert used == context < 512
    assert f"Measured on **{used}** tokens, not 512: this model's context holds {used}." in texts(at)
    assert f"steps over {used} tokens" in texts(at)  # the sweep's estimate too
