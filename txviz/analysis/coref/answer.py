"""One sentence, marked and asked: its words, the suggested pronoun and nouns, where to read attention
from, and the model's own answer after a completion.

Why a choice of query position. In a Winograd pair (Levesque et al. 2012), "The trophy didn't fit in
the suitcase because it was too big/small.", the pronoun comes *before* the word that decides it. A
causal model's row at "it" sees only the words up to "it", so every head's attention there is the same
in both sentences: nothing at the pronoun can depend on "big" or "small". The attention that could
carry the answer is read later: at the deciding word, or at the last token of a completion such as
" The thing that was too big was the", where the model has to name the answer next.

The model's own answer (as in Trinh & Le 2018, "A simple method for commonsense reasoning"): after
sentence + completion, its next-token probability for each candidate's first token, softmax over the
whole vocabulary and renormalized over the candidates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import torch

from txviz.analysis.coref.ranking import token_span

WORD = re.compile(r"\w+(?:['’]\w+)*")  # contractions stay whole: "didn't" is one word
PRONOUNS = frozenset({"he", "she", "it", "they", "him", "her", "them", "his", "its", "their"})
SUBJECT_PRONOUNS = {"he": "The person who", "she": "The person who", "it": "The thing that",
                    "they": "The ones that"}
DETERMINERS = frozenset({"the", "a", "an", "this", "that", "these", "those", "his", "her", "its", "their", "my",
                         "your", "our", "some", "every", "each", "another", "no", "any"})
# Never suggested as a candidate, even when capitalized at the start of a sentence.
FUNCTION_WORDS = DETERMINERS | PRONOUNS | frozenset({
    "i", "you", "we", "me", "us", "and", "but", "or", "so", "because", "when", "while", "if", "then", "after",
    "before", "since", "although", "though", "as", "at", "in", "on", "to", "of", "for", "with", "from", "by",
    "into", "onto", "not", "was", "were", "is", "are", "be", "been", "did", "do", "does", "had", "has", "have",
    "there", "here", "yesterday", "today", "later", "once", "someone", "nobody", "everyone", "what", "who"})
QUERY_KINDS = ("pronoun", "deciding word", "completion end")
CONTRASTS = {"big": "small", "small": "big", "large": "small", "heavy": "light", "light": "heavy", "long": "short",
             "short": "long", "strong": "weak", "weak": "strong", "fast": "slow", "slow": "fast"}
# The other gender's pronoun: "she" → "he" makes the man the answer. "her" is object or possessive; "him" is
# proposed, and the reader edits it where "his" is meant.
GENDER_SWAP = {"she": "he", "he": "she", "him": "her", "his": "her", "her": "him"}


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # character offsets in the sentence, end exclusive
    end: int


def sentence_words(text: str) -> tuple[Word, ...]:
    """The words of ``text``, contractions whole ("didn't", "John's"), punctuation left out."""
    return tuple(Word(m.group(), m.start(), m.end()) for m in WORD.finditer(text))


def suggest_pronoun(words: Sequence[Word]) -> int | None:
    """The first pronoun that has a word before it, or None."""
    return next((i for i, w in enumerate(words) if i > 0 and w.text.lower() in PRONOUNS), None)


def is_noun_like(words: Sequence[Word], i: int) -> bool:
    """A simple heuristic, no tagger: a word right after a determiner ("the trophy", "a book") or a
    capitalized word that is not a function word (a name: "Mary"). Adjectives fool it ("the big box")."""
    lowered = words[i].text.lower()
    if lowered in FUNCTION_WORDS or not words[i].text[0].isalpha():
        return False
    after_determiner = i > 0 and words[i - 1].text.lower() in DETERMINERS
    return after_determiner or words[i].text[0].isupper()


def suggest_candidates(words: Sequence[Word], pronoun: int | None, limit: int = 2) -> list[int]:
    """Up to ``limit`` noun-like words before the pronoun (all words when there is none), first ones
    first; distinct spellings only."""
    end = len(words) if pronoun is None else pronoun
    chosen, seen = [], set()
    for i in range(end):
        if is_noun_like(words, i) and words[i].text.lower() not in seen:
            chosen.append(i)
            seen.add(words[i].text.lower())
    return chosen[:limit]


def suggest_deciding_word(words: Sequence[Word], pronoun: int | None, text: str | None = None) -> int | None:
    """The last word of the pronoun's sentence when it comes after the pronoun and is one of a known
    Winograd contrast (``CONTRASTS``: "big" in "… because it was too big.", which "small" would flip), else
    None. Any other last word is not guessed: in "Mary met John and she smiled." gender settles "she"
    before the pronoun and "smiled" settles nothing; only the reader can say what decides a sentence
    (Levesque et al. 2012 build each pair around such a "special word" and its alternate). With ``text``
    (the string the words were read from), the sentence ends at the first . ! or ? after the pronoun
    that ends a word (not the point in "0.5"), so a text that goes on ("… too big. The thing that was
    too big was the") still gets "big", not "the"."""
    if pronoun is None:
        return None
    last = len(words) - 1
    if text is not None:
        stop = re.search(r"[.!?](?=\s|$)", text[words[pronoun].end:])
        if stop:
            end = words[pronoun].end + stop.start()
            last = max(i for i in range(pronoun, len(words)) if words[i].start < end)
    if pronoun >= last or words[last].text.lower() not in CONTRASTS:
        return None
    return last


def default_completion(text: str, words: Sequence[Word], pronoun: int | None,
                       candidates: Sequence[int]) -> str:
    """A completion after which the next word should be the answer: " The thing that was too big was
    the" for "… because it was too big." (a subject pronoun: restate what is said of it), else
    " In this sentence, "her" means". Ends in " the" when every candidate follows "the"/"a"/"an". What is
    restated is the rest of the pronoun's own sentence; a text that already ends with the completion (a
    link to the sentence with its completion) gets none, so it is not asked twice."""
    if pronoun is None:
        return ""
    said = re.split(r"(?<=[.!?])\s", text[words[pronoun].end:], maxsplit=1)[0].strip().rstrip(".!?;,:").strip()
    lead = SUBJECT_PRONOUNS.get(words[pronoun].text.lower())
    verb = "were" if words[pronoun].text.lower() == "they" else "was"
    completion = f" {lead} {said} {verb}" if lead and said else f' In this sentence, "{words[pronoun].text}" means'
    if candidates and all(c > 0 and words[c - 1].text.lower() in {"the", "a", "an"} for c in candidates):
        completion += " the"
    return "" if text.rstrip().endswith(completion.strip()) else completion


def query_row(kind: str, offsets: Sequence[tuple[int, int]], special: Sequence[bool] | None, *,
              pronoun: tuple[int, int], deciding: tuple[int, int] | None = None) -> int:
    """The token whose attention row is read: the last token of the pronoun or of the deciding word
    (character spans), or the last ordinary token of the whole text ("completion end")."""
    if kind not in QUERY_KINDS:
        raise ValueError(f"query kind must be one of {QUERY_KINDS}, got {kind!r}")
    if kind == "completion end":
        rows = [i for i, (a, b) in enumerate(offsets) if b > a and not (special is not None and special[i])]
    elif kind == "deciding word" and deciding is None:
        raise ValueError("no deciding word is marked")
    else:
        rows = list(token_span(offsets, *(pronoun if kind == "pronoun" else deciding), special))
    if not rows:
        raise ValueError(f"no ordinary token for the {kind}")
    return rows[-1]


def contrast_sentence(text: str, word: Word, replacement: str) -> str:
    """``text`` with ``word`` replaced: the other sentence of a Winograd pair ("… too small.")."""
    return text[:word.start] + replacement + text[word.end:]


def swap_gender(text: str, pronoun: str) -> str | None:
    """``text`` with every whole word ``pronoun`` ("she", "She") replaced by the other gender's ("he", "He"),
    or None when it has none ("it", "they"). A counterfactual that flips the answer when the candidates
    differ in gender ("Mary … she" → "Mary … he": John), with the same words around it; swapping the
    candidates instead leaves the pronoun meaning the same person and tests name order only."""
    other = GENDER_SWAP.get(pronoun.lower())
    if other is None:
        return None
    keep_case = lambda m: other.capitalize() if m.group()[0].isupper() else other  # noqa: E731
    return re.sub(rf"\b{re.escape(pronoun)}\b", keep_case, text, flags=re.IGNORECASE)


def max_row_difference(probs_a: torch.Tensor, probs_b: torch.Tensor, row: int) -> float:
    """probs (L, H, T, T) of two sentences that agree up to token ``row`` → the largest |difference|
    of any head's attention row at ``row`` (0.0 for a causal model: it cannot see what follows)."""
    return float((probs_a[:, :, row, :row + 1] - probs_b[:, :, row, :row + 1]).abs().max())


# ---- the model's own answer ------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    words: tuple[str, ...]
    token_ids: tuple[int, ...]  # the first token of " " + word, for each candidate
    tokens: tuple[str, ...]
    p_vocab: tuple[float, ...]  # softmax over the whole vocabulary
    p_candidates: tuple[float, ...]  # the same, renormalized over the candidates
    top: tuple[tuple[str, float], ...]  # the model's 5 likeliest next tokens

    @property
    def shared_first_token(self) -> bool:
        """Two candidates start with the same token: their probabilities cannot tell them apart."""
        return len(set(self.token_ids)) < len(self.token_ids)


def as_next_word(word: str) -> str:
    """``word`` as the model would name it next in a sentence, after a space: "trophy", " trophy" and
    "trophy " all become " trophy". The one rule for every word whose probability or logit is read (the
    candidates here, the answer and wrong words of txviz.causal): in a byte-level vocabulary "trophy"
    without its space starts with another token ("su" of "suitcase" instead of " suit")."""
    return " " + word.strip()


def first_tokens(tokenizer, words: Sequence[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Each word's first token as it would follow a space (``as_next_word``: " trophy"), with no BOS."""
    encodings = [tokenizer.encode(as_next_word(word), bos="none") for word in words]
    if any(not e.ids for e in encodings):
        raise ValueError("a candidate has no token in this vocabulary")
    return tuple(e.ids[0] for e in encodings), tuple(_token_name(tokenizer, e.ids[0]) for e in encodings)


def candidate_probabilities(logits: torch.Tensor, token_ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (V,) of the next token → (p over the vocabulary, p renormalized over the candidates), each (C,)."""
    probs = torch.softmax(logits.double(), dim=-1)[list(token_ids)]
    return probs, probs / probs.sum()


def read_answer(logits: torch.Tensor, tokenizer, words: Sequence[str]) -> Answer:
    """The model's answer from the next-token logits (V,) after sentence + completion."""
    ids, tokens = first_tokens(tokenizer, words)
    p_vocab, p_candidates = candidate_probabilities(logits, ids)
    top = torch.softmax(logits.double(), dim=-1).topk(5)
    names = [_token_name(tokenizer, int(i)) for i in top.indices]
    return Answer(tuple(words), ids, tokens, tuple(float(p) for p in p_vocab), tuple(float(p) for p in p_candidates),
                  tuple((str(n), float(p)) for n, p in zip(names, top.values)))


def _token_name(tokenizer, token_id: int) -> str:
    if token_id >= getattr(tokenizer, "vocab_size", token_id + 1):  # a row of an embedding padded past the tokenizer
        return f"<id {token_id}: no token>"
    for method in ("display", "id_to_token"):  # txviz's Tokenizer shows " the" for "Ġthe"
        if hasattr(tokenizer, method):
            return str(getattr(tokenizer, method)(token_id))
    return str(token_id)


def model_answer(source, sentence: str, completion: str, words: Sequence[str], *, bos: str = "sink") -> Answer:
    """Run the model on ``sentence + completion`` and read its answer. ``source``: a LoadedModel or a
    (model, tokenizer) pair."""
    model, tokenizer = (source.model, source.tokenizer) if hasattr(source, "model") else source
    ids = torch.as_tensor(list(tokenizer.encode(sentence + completion, bos=bos).ids))[None]  # (1, T)
    with torch.inference_mode():
        logits = model(ids, last_only=True)[0, -1]  # (V,)
    return read_answer(logits, tokenizer, words)
