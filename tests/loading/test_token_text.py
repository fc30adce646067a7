"""Tokens shown as text: a character split over byte-level tokens appears whole on the token that ends it."""

from __future__ import annotations

import pytest

from txviz.loading.tokenizer.token_text import CONTINUES, readable_tokens

SMILE = "😀".encode()  # f0 9f 98 80


def texts(pieces, special=None):
    return [t.text for t in readable_tokens(pieces, special)]


def test_a_character_split_over_two_tokens_shows_on_the_token_that_ends_it():
    tokens = readable_tokens([b"I ", SMILE[:2], SMILE[2:] + b" you"])
    assert [t.text for t in tokens] == ["I ", CONTINUES, "😀 you"]
    assert tokens[1].raw == b"\xf0\x9f" and tokens[1].hex == "f0 9f"
    assert tokens[1].spans == ((1, 2),) and tokens[2].spans == ((1, 2),) and tokens[0].spans == ()
    assert "bytes f0 9f" in tokens[1].tooltip(1) and "tokens 1–2" in tokens[1].tooltip(1)


def test_a_token_can_end_one_character_and_start_the_next():
    # 中 = e4 b8 ad, 文 = e6 96 87, split as [e4] [b8 ad e6] [96 87]
    a, b = "中".encode(), "文".encode()
    assert texts([a[:1], a[1:] + b[:1], b[1:]]) == [CONTINUES, "中" + CONTINUES, "文"]


def test_a_four_byte_character_over_four_tokens():
    assert texts([bytes([byte]) for byte in SMILE]) == [CONTINUES] * 3 + ["😀"]


def test_bytes_that_never_form_a_character_stay_escapes():
    assert texts([b"\xff", b"a\x80"]) == ["\\xff", "a\\x80"]
    assert texts([SMILE[:2], b"x"]) == ["\\xf0\\x9f", "x"]  # a character cut short is no character


def test_special_tokens_are_never_joined_to_their_neighbours():
    tokens = readable_tokens([SMILE[:2], b"<|endoftext|>", SMILE[2:]], [False, True, False])
    assert [t.text for t in tokens] == ["\\xf0\\x9f", "<|endoftext|>", "\\x98\\x80"]
    with pytest.raises(ValueError):
        readable_tokens([b"a"], [False, True])


def test_plain_text_is_unchanged():
    pieces = [b"The", b" caf\xc3\xa9", b" \xe2\x80\x94"]
    assert texts(pieces) == ["The", " café", " —"]


@pytest.mark.default_model
def test_the_default_tokenizer_puts_emoji_back_together(default_model):
    tok = default_model.tokenizer
    text = "I 😀 you 🦜, 中文 ok"
    encoding = tok.encode(text, bos="sink")
    pieces = [tok.token_bytes(i) for i in encoding.ids]
    assert b"".join(pieces[1:]) == text.encode()  # every byte, in order, once
    shown = readable_tokens(pieces, encoding.special, encoding.tokens)
    assert shown[0].text == encoding.tokens[0]  # the sink is shown as itself
    assert any("\\x" in t for t in encoding.tokens)  # the tokenizer does split these characters
    assert not any("\\x" in t.text for t in shown)
    assert "".join(t.text for t in shown[1:]).replace(CONTINUES, "") == text


def test_byte_fallback_tokens_are_put_back_together():
    """A SentencePiece-style vocabulary spells an unknown character as <0x..> byte tokens."""
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers

    from txviz.loading.tokenizer.tokenizer import Tokenizer

    vocab = {"<unk>": 0, "a": 1, **{f"<0x{byte:02X}>": 2 + byte for byte in range(256)}}
    backend = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    backend.pre_tokenizer = pre_tokenizers.Split(" ", "isolated")
    backend.decoder = decoders.ByteFallback()
    tok = Tokenizer(backend)
    encoding = tok.encode("a😀")
    assert len(encoding.ids) == 5  # "a" and four byte tokens
    pieces = [tok.token_bytes(i) for i in encoding.ids]
    assert pieces == [b"a", *(bytes([byte]) for byte in SMILE)]
    assert [t.text for t in readable_tokens(pieces, encoding.special)] == ["a", CONTINUES, CONTINUES, CONTINUES, "😀"]


def test_bidi_controls_are_shown_as_escapes():
    """A token that is a bidirectional control (U+202E reverses what follows) is shown as its escape, so the
    tokens drawn after it keep their order; its bytes stay its own."""
    pieces = [b"a", "\u202e".encode(), "x\u2067".encode(), b"bc", "\u200f".encode()]
    shown = readable_tokens(pieces)
    assert [t.text for t in shown] == ["a", "\\u202e", "x\\u2067", "bc", "\\u200f"]
    assert [t.raw for t in shown] == pieces


def test_other_characters_are_kept():
    assert [t.text for t in readable_tokens(["é".encode(), "שלום".encode()])] == ["é", "שלום"]
