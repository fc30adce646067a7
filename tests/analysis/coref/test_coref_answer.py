"""One sentence, marked and asked (txviz.analysis.coref.answer): words, suggestions, query rows, the
model's own answer against a direct computation, and the causal fact behind the page's warning."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.byte_tokenizer import ByteLevelTokenizer
from tests.helpers.tiny import random_decoder, tiny_config
from txviz.analysis.coref.ranking import word_token_spans
from txviz.analysis.coref.answer import (candidate_probabilities, contrast_sentence, default_completion,
                                         first_tokens, max_row_difference, model_answer, query_row, read_answer,
                                         sentence_words, suggest_candidates, suggest_deciding_word, suggest_pronoun,
                                         swap_gender)
from txviz.capture.trace import trace

TROPHY = "The trophy didn't fit in the suitcase because it was too big."
MARY = "Mary met John at the station, and she gave him a book."


def texts(words, indices):
    return [words[i].text for i in indices]


# ---- words and suggestions -------------------------------------------------------------------------

def test_sentence_words_keep_contractions_whole():
    words = sentence_words(TROPHY)
    assert [w.text for w in words] == ["The", "trophy", "didn't", "fit", "in", "the", "suitcase", "because",
                                       "it", "was", "too", "big"]
    assert all(TROPHY[w.start:w.end] == w.text for w in words)
    assert [w.text for w in sentence_words("John’s cat isn't here")] == ["John’s", "cat", "isn't", "here"]


@pytest.mark.parametrize("text, pronoun, candidates, deciding", [
    (TROPHY, "it", ["trophy", "suitcase"], "big"),  # nouns after "the", not "The"/"didn"
    (MARY, "she", ["Mary", "John"], None),  # names; "book" is a noun, not a deciding word
    ("The city council refused the demonstrators a permit because they feared violence.", "they",
     ["city", "demonstrators"], None),  # no known contrast ends it: no guess
    ("Her dog chased a cat until it was tired.", "it", ["dog", "cat"], None),  # "Her" is a determiner here
])
def test_suggestions(text, pronoun, candidates, deciding):
    words = sentence_words(text)
    p = suggest_pronoun(words)
    assert words[p].text == pronoun
    assert texts(words, suggest_candidates(words, p)) == candidates
    d = suggest_deciding_word(words, p)
    assert (None if d is None else words[d].text) == deciding


def test_suggestions_without_a_pronoun():
    words = sentence_words("Paris is the capital of France.")
    assert suggest_pronoun(words) is None
    assert texts(words, suggest_candidates(words, None, limit=3)) == ["Paris", "capital", "France"]
    assert suggest_deciding_word(words, None) is None


def test_default_completion():
    words = sentence_words(TROPHY)
    assert default_completion(TROPHY, words, 8, [1, 6]) == " The thing that was too big was the"
    mary = sentence_words(MARY)
    assert default_completion(MARY, mary, 7, [0, 2]) == " The person who gave him a book was"
    assert default_completion(MARY, mary, 9, [0, 2]) == ' In this sentence, "him" means'  # an object pronoun
    they = "The councilmen refused the demonstrators a permit because they feared violence."
    assert default_completion(they, sentence_words(they), 8, [1, 4]) == " The ones that feared violence were the"
    assert default_completion(TROPHY, words, None, []) == ""


def test_the_completion_restates_the_pronouns_own_sentence_and_is_never_asked_twice():
    """A second sentence after the pronoun's is not restated; a text that already ends with its completion
    (as a shared link to the sentence and its completion does) gets none, instead of the question twice."""
    longer = TROPHY + " Nobody was surprised."
    assert default_completion(longer, sentence_words(longer), 8, [1, 6]) == " The thing that was too big was the"
    completed = TROPHY + " The thing that was too big was the"
    assert default_completion(completed, sentence_words(completed), 8, [1, 6]) == ""


def test_contrast_sentence():
    words = sentence_words(TROPHY)
    assert contrast_sentence(TROPHY, words[-1], "small") == TROPHY.replace("big", "small")


# ---- query rows ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, pronoun, swapped", [
    (MARY + ' In this sentence, "she" means', "she", 'Mary met John at the station, and he gave him a book. In '
                                                     'this sentence, "he" means'),  # the completion too
    ("He said he would. Shell", "he", "She said she would. Shell"),  # case kept, whole words only
    ("Ana met Tom and gave him a pen.", "him", "Ana met Tom and gave her a pen."),
    (TROPHY, "it", None), ("They left.", "they", None),  # no other gender: no proposal
])
def test_swap_gender(text, pronoun, swapped):
    assert swap_gender(text, pronoun) == swapped


def test_query_row_for_each_kind():
    tokenizer = ByteLevelTokenizer()
    text = TROPHY + " The thing that was too big was the"
    encoding = tokenizer.encode(text, bos="sink")
    words = sentence_words(TROPHY)
    spans = dict(pronoun=(words[8].start, words[8].end), deciding=(words[11].start, words[11].end))
    pronoun = query_row("pronoun", encoding.offsets, encoding.special, **spans)
    deciding = query_row("deciding word", encoding.offsets, encoding.special, **spans)
    end = query_row("completion end", encoding.offsets, encoding.special, **spans)
    assert encoding.tokens[pronoun] == "t"  # " it" is "Ġ", "i", "t" in this small vocabulary: the last one
    assert encoding.tokens[deciding] == "g" and end == len(encoding.ids) - 1
    assert pronoun < deciding < end
    with pytest.raises(ValueError, match="no deciding word"):
        query_row("deciding word", encoding.offsets, encoding.special, pronoun=spans["pronoun"])
    with pytest.raises(ValueError, match="query kind"):
        query_row("candidate", encoding.offsets, encoding.special, **spans)


# ---- the model's answer ----------------------------------------------------------------------------

def test_candidate_probabilities():
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0])
    p_vocab, p_candidates = candidate_probabilities(logits, [3, 1])
    full = torch.softmax(logits.double(), -1)
    torch.testing.assert_close(p_vocab, full[[3, 1]])
    torch.testing.assert_close(p_candidates, full[[3, 1]] / (full[3] + full[1]))
    assert float(p_candidates.sum()) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def tiny():
    tokenizer = ByteLevelTokenizer()
    model = random_decoder(tiny_config(vocab_size=tokenizer.vocab_size, n_kv_heads=2, max_seq_len=128))
    return model, tokenizer


def test_model_answer_matches_a_direct_computation(tiny):
    model, tokenizer = tiny
    completion = " The person who gave him a book was"
    words = ["she", "John"]  # first tokens "Ġshe" and "Ġ" in this small vocabulary: distinct
    answer = model_answer(tiny, MARY, completion, words, bos="sink")
    ids = torch.tensor([tokenizer.encode(MARY + completion, bos="sink").ids])
    with torch.no_grad():
        probs = torch.softmax(model(ids)[0, -1].double(), -1)
    mary, john = (tokenizer.encode(" " + w).ids[0] for w in words)
    assert answer.token_ids == (mary, john) and not answer.shared_first_token
    assert answer.p_vocab == pytest.approx([float(probs[mary]), float(probs[john])], rel=1e-5)
    assert answer.p_candidates == pytest.approx([float(probs[mary] / (probs[mary] + probs[john])),
                                                 float(probs[john] / (probs[mary] + probs[john]))], rel=1e-5)
    assert [p for _, p in answer.top] == pytest.approx(probs.topk(5).values.tolist(), rel=1e-5)
    traced = trace(model, ids, capture=("attn_probs", "logits"))  # what the page reads: the trace's logits
    assert read_answer(traced["logits"][0, -1], tokenizer, words).p_vocab == pytest.approx(answer.p_vocab)


def test_first_tokens_flag_candidates_that_start_alike(tiny):
    _, tokenizer = tiny
    ids, _ = first_tokens(tokenizer, ["John", "Jo"])  # byte-level: both start with "Ġ" here
    logits = torch.zeros(tokenizer.vocab_size)
    assert ids[0] == ids[1] and read_answer(logits, tokenizer, ["John", "Jo"]).shared_first_token


def test_a_top_token_past_the_tokenizer_is_named_by_number():
    """An embedding padded past the tokenizer (Qwen3, OLMo 2, gpt-oss) can put a row without a token among
    the five likeliest: the answer is still read, that row written by its id (txviz's Tokenizer refuses it)."""
    from txviz.loading.tokenizer.tokenizer import Tokenizer
    from txviz.loading.zoo import SHIPPED_ZOO

    tokenizer = Tokenizer.from_file(SHIPPED_ZOO / "alibi" / "tokenizer.json")  # a word-level vocabulary
    logits = torch.zeros(tokenizer.vocab_size + 4)
    logits[tokenizer.vocab_size + 2] = 5.0
    answer = read_answer(logits, tokenizer, ["Mary", "John"])
    assert answer.top[0][0] == f"<id {tokenizer.vocab_size + 2}: no token>"
    assert answer.p_candidates == pytest.approx([0.5, 0.5])


def test_causal_rows_before_the_deciding_word_cannot_change(tiny):
    """The page's warning, on a tiny random model: the pronoun's row is the same in both sentences."""
    model, tokenizer = tiny
    words = sentence_words(TROPHY)
    probs = []
    for text in (TROPHY, contrast_sentence(TROPHY, words[-1], "small")):
        encoding = tokenizer.encode(text, bos="sink")
        probs.append(trace(model, torch.tensor([encoding.ids]))["attn_probs"][:, 0])
    row, _ = word_token_spans(encoding.offsets, encoding.special, (words[8].start, words[8].end), [])
    assert max_row_difference(probs[0], probs[1], row) == 0.0
    last = min(probs[0].shape[-1], probs[1].shape[-1]) - 1  # after "too": the sentences differ
    assert max_row_difference(probs[0], probs[1], last) > 0


# ---- the default model (SmolLM2-135M-Instruct) -----------------------------------------------------

@pytest.mark.default_model
def test_winograd_pair_in_the_default_model(default_model):
    """Bit-identical rows at "it" in "…too big." and "…too small."; the model's answer is read after the
    completion and agrees with a direct computation."""
    tokenizer = default_model.tokenizer
    words = sentence_words(TROPHY)
    small = contrast_sentence(TROPHY, words[-1], "small")
    traces = [trace(default_model.model, torch.tensor([tokenizer.encode(t, bos="sink").ids])) for t in (TROPHY, small)]
    encoding = tokenizer.encode(TROPHY, bos="sink")
    row, _ = word_token_spans(encoding.offsets, encoding.special, (words[8].start, words[8].end), [])
    assert encoding.tokens[row].strip() == "it"
    assert max_row_difference(traces[0]["attn_probs"][:, 0], traces[1]["attn_probs"][:, 0], row) == 0.0
    completion = default_completion(TROPHY, words, 8, [1, 6])
    answer = model_answer(default_model, TROPHY, completion, ["trophy", "suitcase"])
    ids = torch.tensor([tokenizer.encode(TROPHY + completion, bos="sink").ids])
    with torch.no_grad():
        probs = torch.softmax(default_model.model(ids)[0, -1].double(), -1)
    assert answer.tokens == (" trophy", " suit")
    assert answer.p_vocab == pytest.approx([float(probs[i]) for i in answer.token_ids], rel=1e-4)
    assert sum(answer.p_candidates) == pytest.approx(1.0)
