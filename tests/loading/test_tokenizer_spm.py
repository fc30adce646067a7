"""The SentencePiece-style GGUF tokenizer (Gemma's: ``tokenizer.ggml.model`` = "llama") on a tiny vocabulary
shaped like Gemma's (tests/helpers/tiny_gguf_gemma.py): pieces by hand, transformers' own GGUF converter as
the reference, and the one place the two rules differ (merges ranked by score vs by file order)."""

from __future__ import annotations

import pytest

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny_gguf_gemma import SPACE, spm_metadata, spm_vocab
from txviz.loading.tokenizer.tokenizer import Tokenizer
from txviz.loading.tokenizer.spm import derived_merges

TEXTS = ["hello world", "The world is hello", "héllo, world!", "a\n\nb\nc", "x  y   z", "€ 12 25",
         "<bos>the<s>in", " the  the", "THE", "\tthe\t\t", "🦙 and 日本", "", " ", "trailing  ", "a\u2581 b",
         "x \u2581 hello", "\u2581"]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_gguf_metadata(spm_metadata())


def pieces(tokenizer: Tokenizer, text: str) -> list[str]:
    return [tokenizer.id_to_token(i) for i in tokenizer.encode(text).ids]


def test_pieces_merge_as_sentencepiece_bpe(tokenizer):
    assert pieces(tokenizer, "hello world") == ["hello", SPACE + "world"]
    assert pieces(tokenizer, "héllo, world!") == ["h", "é", "llo", ",", SPACE + "world", "!"]
    assert pieces(tokenizer, " the") == [SPACE + "the"]  # no prefix space is added (add_space_prefix false)
    assert pieces(tokenizer, "the") == ["t", "he"]  # "he" scores above "th": merged first


def test_user_defined_tokens_are_matched_whole_and_longest_first(tokenizer):
    assert pieces(tokenizer, "a\n\nb\nc") == ["a", "\n\n", "b", "\n", "c"]
    tokens = spm_vocab()[0]
    assert tokenizer.encode("x  y   z").ids[1::2] == (tokens.index("  "), tokens.index("   "))
    assert pieces(tokenizer, "x  y   z") == ["x", SPACE * 2, "y", SPACE * 3, "z"]  # the file's "  ", respelled
    assert pieces(tokenizer, "a" + SPACE + " b") == ["a", SPACE * 2, "b"]  # matched after spaces became "▁"
    assert pieces(tokenizer, "<s>in<div>") == ["<s>", "in", "<div>"]


def test_characters_outside_the_vocabulary_fall_back_to_bytes_and_decode_back(tokenizer):
    assert pieces(tokenizer, "€") == ["<0xE2>", "<0x82>", "<0xAC>"]
    assert tokenizer.token_bytes(tokenizer.encode("€").ids[0]) == b"\xe2"
    for text in TEXTS:  # a literal "▁" is SentencePiece's space: it comes back as " " (so in transformers too)
        assert tokenizer.decode(tokenizer.encode(text).ids) == text.replace(SPACE, " "), text


def test_special_tokens_bos_policy_and_sink(tokenizer):
    assert tokenizer.bos_token == "<bos>" and tokenizer.eos_token == "<eos>"
    assert tokenizer.adds_bos  # the file says so; encode still adds nothing unless asked
    assert tokenizer.encode("hello").ids == (tokenizer.token_to_id("hello"),)
    assert tokenizer.encode("hello", bos="bos").ids[0] == tokenizer.bos_id
    assert tokenizer.sink_token == "<bos>"  # "<s>" is a user-defined tag here, not a document boundary
    assert tokenizer.encode("<start_of_turn>").special == (True,)
    assert tokenizer.display(tokenizer.token_to_id(SPACE + "world")) == " world"


@needs_transformers
def test_equal_to_transformers_gguf_tokenizer():
    mapping = pytest.importorskip("transformers.integrations.gguf.gguf_tokenizer_mapping")
    tokens, scores, types = spm_vocab()
    reference, _ = mapping.convert_gguf_tokenizer("gemma3", {
        "tokenizer_type": "llama", "pre_tokenizer_type": "default", "tokens": tokens, "scores": scores,
        "token_type": types, "bos_token_id": 2, "eos_token_id": 1, "unk_token_id": 3, "pad_token_id": 0,
        "add_prefix_space": False})
    ours = Tokenizer.from_gguf_metadata(spm_metadata())
    for text in TEXTS:
        assert list(ours.encode(text).ids) == reference.encode(text, add_special_tokens=False).ids, text


def test_merges_follow_scores_not_file_order():
    """SentencePiece and llama.cpp merge the pair whose result scores highest. transformers' GGUF converter
    ranks Gemma's merges by file order instead; on Gemma 3's real file both orders agree (normal tokens'
    scores are exactly minus their rank), so this differs only on a file whose scores disagree with it."""
    tokens = ["<unk>", "a", "b", "c", "bc", "ab"]  # "bc" listed first, but "ab" scores higher
    scores = [0.0, -10.0, -11.0, -12.0, -5.0, -1.0]
    types = [3, 1, 1, 1, 1, 1]
    assert derived_merges(tokens, scores, types) == [("a", "b"), ("b", "c")]
    tokenizer = Tokenizer.from_gguf_metadata(spm_metadata(tokens, scores, types))
    assert pieces(tokenizer, "abc") == ["ab", "c"]


def test_mismatched_score_list_is_refused():
    from txviz.loading.errors import ModelLoadError
    from txviz.loading.gguf.loader import GGUFHeader, tokenizer_from_header

    metadata = spm_metadata()
    metadata["tokenizer.ggml.scores"] = metadata["tokenizer.ggml.scores"][:-3]
    with pytest.raises(ModelLoadError, match="scores"):
        tokenizer_from_header(GGUFHeader(path="m.gguf", metadata=metadata, tensor_types={}))


def test_a_run_longer_than_any_piece_is_split_longest_first():
    """SentencePiece (and llama.cpp) match user-defined pieces longest first, left to right: five spaces
    with pieces of two and three are "▁▁▁" + "▁▁". transformers' GGUF tokenizer forms the runs by merges
    instead, ranked by file order, and gets "▁▁" + "▁▁▁" here; on Gemma 3's vocabulary (runs up to 31
    spaces) the two differ only on runs longer than 31."""
    tokens = spm_vocab()[0]
    tokenizer = Tokenizer.from_gguf_metadata(spm_metadata())
    assert tokenizer.encode("x" + " " * 5).ids[1:] == (tokens.index("   "), tokens.index("  "))

