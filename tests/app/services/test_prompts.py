"""A prompt is checked before anything runs: encoded under the limits passed in, or PromptError."""

from types import SimpleNamespace

import pytest

from app.services import prompts
from txviz.limits import Estimate, Limits


def test_a_story_is_encoded_after_the_sink_token(tiny, story):
    encoding = prompts.encode(tiny, story, "sink", Limits())
    assert encoding.ids[0] == tiny.tokenizer.sink_id and len(encoding.ids) > 20
    assert prompts.dropped_characters(encoding) is None


@pytest.mark.parametrize("prompt", ["", "   \n", None])
def test_an_empty_prompt_is_refused(tiny, prompt):
    with pytest.raises(prompts.PromptError, match="empty"):
        prompts.encode(tiny, prompt, "sink", Limits())


def test_the_limits_passed_in_are_the_ones_applied(tiny, story):
    with pytest.raises(prompts.PromptError, match="TXVIZ_MAX_PROMPT_CHARS"):
        prompts.encode(tiny, story, "sink", Limits(max_prompt_chars=10))
    with pytest.raises(prompts.PromptError, match="TXVIZ_MAX_TOKENS"):
        prompts.encode(tiny, story, "sink", Limits(max_prompt_tokens=5))
    long = prompts.encode(tiny, story, "sink", Limits(max_prompt_tokens=5), long=True)  # the long view's limit
    assert len(long.ids) > 5


def test_the_model_context_counts_the_tokens_to_generate(tiny, story):
    n = len(prompts.encode(tiny, story, "sink", Limits()).ids)
    prompts.encode(tiny, story, "sink", Limits(), n_new=tiny.config.max_seq_len - n)
    with pytest.raises(prompts.PromptError, match="context is 128 tokens"):
        prompts.encode(tiny, story, "sink", Limits(), n_new=tiny.config.max_seq_len - n + 1)


def test_dropped_characters_are_named_eight_at_most():
    encoding = SimpleNamespace(text="abcdefghij", dropped=tuple(range(10)))
    note = prompts.dropped_characters(encoding)
    assert note.startswith("10 character(s)") and "U+0061" in note and "U+0069" not in note
    assert note.endswith("and 2 more.")


def test_budget_checks_refuse_with_the_setting_to_change(tiny):
    estimate = Estimate("a run", 5000, 1.0)
    assert prompts.within_budget(estimate, Limits()) is estimate
    with pytest.raises(prompts.PromptError, match="TXVIZ_MEMORY_BUDGET"):
        prompts.within_budget(estimate, Limits(memory_budget_bytes=4000))
    prompts.check_passes(tiny, 64, 3, "three passes", Limits())
    with pytest.raises(prompts.PromptError, match="three passes"):
        prompts.check_passes(tiny, 64, 3, "three passes", Limits(memory_budget_bytes=1000))


def test_a_tokenizer_that_panics_gives_a_prompt_error_not_a_dead_script(tiny):
    """A model file's pre-tokenizer regex ``(a+)+c`` makes the Rust tokenizer panic (a BaseException);
    the visitor gets the reason, and the same tokenizer still encodes other text."""
    import dataclasses

    import tokenizers
    from tokenizers import Regex, models, pre_tokenizers

    from txviz.loading.tokenizer.tokenizer import Tokenizer

    backend = tokenizers.Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+c"), behavior="isolated")
    hostile = dataclasses.replace(tiny, tokenizer=Tokenizer(backend))
    # The regex engine gives up (its retry limit) within about 0.2 s on a quiet machine; on a busy one the
    # worker's 1 s time limit may end it first. Either way the visitor is told the tokenizer failed.
    with pytest.raises(prompts.PromptError, match="tokenizer failed to encode the text: .*(retry-limit|stopped after)"):
        prompts.encode(hostile, "a" * 40 + "b", "none", Limits())
    assert prompts.encode(hostile, "a b", "none", Limits()).ids == (2,)
