"""Tokenizing a user's text with a file's own regexes: the Rust engine's retry limit stops
one catastrophic match attempt, not many attempts each just under it, and the prompt cap does not help
(100 characters already take seconds). Such tokenizers encode in a capped child process: the worst input
at the longest prompt is refused within the child's limit while other threads keep running, and every
other text encodes exactly as in-process. Tokenizers with only built-in or published regexes stay
in-process."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
import tokenizers
from tokenizers import Regex, models, normalizers, pre_tokenizers

from txviz.limits import Limits
from txviz.loading.errors import TokenizerError
from txviz.loading.tokenizer.bpe import LLAMA3_SPLIT
from txviz.loading.tokenizer import isolation as tokenizer_isolation
from txviz.loading.tokenizer.isolation import ENCODE_LIMITS, encode_limits
from txviz.loading.tokenizer.tokenizer import Tokenizer

VOCAB = {"a": 0, "b": 1, "[UNK]": 2, "ab": 3, "x": 4, "y": 5}


def word_level(pre_tokenizer=None, normalizer=None) -> tokenizers.Tokenizer:
    backend = tokenizers.Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    if pre_tokenizer is not None:
        backend.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        backend.normalizer = normalizer
    return backend


def hostile() -> Tokenizer:
    return Tokenizer(word_level(pre_tokenizers.Split(Regex("(a+)+c"), behavior="isolated")))


def worst_text() -> str:
    """Attempts of 2^22 steps each, just under onig's retry limit, as many as the longest prompt holds."""
    return ("a" * 22 + "b") * (Limits().max_prompt_chars // 23)


def test_the_worst_input_at_the_longest_prompt_is_refused_within_the_limit_while_others_run(monkeypatch):
    """The text would take minutes, so the cap at the longest prompt is lowered from 3.5 s to 1 s here (the
    child burnt 3.5 CPU s); the real limits' rule and a real limit's kill are held by the test below."""
    cap = replace(ENCODE_LIMITS, seconds=1.0)  # the same memory cap
    monkeypatch.setattr(tokenizer_isolation, "ENCODE_LIMITS", cap)
    tokenizer, ticks, done = hostile(), [0], threading.Event()

    def other_session():  # pure Python: runs only while nobody holds the interpreter lock
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=other_session)
    thread.start()
    started = time.perf_counter()
    try:
        text = worst_text()
        limit = encode_limits(len(text)).seconds  # the cap at the longest prompt
        assert limit == cap.seconds
        with pytest.raises(TokenizerError, match=f"failed to encode the text: stopped after {limit:g} s"):
            tokenizer.encode(text)
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        thread.join()
    assert elapsed < cap.seconds + 5
    assert ticks[0] > 0.2 * elapsed * 1000 / 2, ticks  # the other thread was not frozen (≥ 20 % of 1 ms ticks)


def test_a_short_hostile_prompt_is_refused_in_about_a_second():
    """The wall limit grows with the text (legitimate encoding is linear): 1 s + 25 µs per character."""
    text = ("a" * 22 + "b") * 100  # 2 300 characters: minutes in-process
    limit = encode_limits(len(text)).seconds
    assert limit == pytest.approx(1.0575) and encode_limits(10**6).seconds == ENCODE_LIMITS.seconds
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match=f"stopped after {limit:g} s"):
        hostile().encode(text)
    assert time.perf_counter() - started < limit + 3  # the child's start and the kill


def test_a_hostile_tokenizer_encodes_other_text_as_in_process():
    tokenizer = hostile()
    assert tokenizer.isolated
    in_process = word_level(pre_tokenizers.Split(Regex("(a+)+c"), behavior="isolated")).encode("a b", add_special_tokens=False)
    encoding = tokenizer.encode("a b", bos="none")
    assert list(encoding.ids) == in_process.ids == [2]
    assert list(encoding.offsets) == [tuple(o) for o in in_process.offsets]


def test_a_custom_regex_in_a_normalizer_is_isolated_and_exact():
    backend = word_level(pre_tokenizers.Whitespace(), normalizers.Replace(Regex("x+"), "y"))
    tokenizer = Tokenizer(backend)
    assert tokenizer.isolated
    text = "a xxx b ab x"
    expected = backend.encode(text, add_special_tokens=False)
    encoding = tokenizer.encode(text)
    assert list(encoding.ids) == expected.ids and list(encoding.offsets) == [tuple(o) for o in expected.offsets]


def test_a_lone_surrogate_is_refused_as_in_process():
    with pytest.raises(TokenizerError, match="lone surrogate"):
        hostile().encode("a \ud800 b")


@pytest.mark.parametrize("pre_tokenizer", [
    None, pre_tokenizers.Whitespace(), pre_tokenizers.ByteLevel(add_prefix_space=False),
    pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
])
def test_built_in_and_published_regexes_stay_in_process(pre_tokenizer):
    assert not Tokenizer(word_level(pre_tokenizer)).isolated


def test_a_gguf_tokenizer_and_the_zoo_stay_in_process(tmp_path):
    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
    from txviz.loading import load
    from txviz.loading.zoo import SHIPPED_ZOO

    config = tiny()
    assert not load(write_gguf(tmp_path / "t.gguf", config, weights_of(config)), device="cpu").tokenizer.isolated
    if (SHIPPED_ZOO / "base" / "tokenizer.json").is_file():
        assert not load(SHIPPED_ZOO / "base", device="cpu").tokenizer.isolated
