"""The marks a reader puts on one sentence (pronoun, candidates, deciding word, completion), checked, and
the names that tie each choice to the sentence it was made on.

Why names from a digest of the sentence: the suggested pronoun and candidates come from the sentence
(``coref_answer.suggest_*``). A choice kept under a fixed name would outlive its sentence and point at
the wrong words of the next one; a name that carries a digest of the sentence (and of any other input a
choice depends on) starts fresh when that input changes, and the choices of other sentences can be
found and forgotten.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

from txviz.analysis.coref.answer import QUERY_KINDS, sentence_words, suggest_pronoun

MARK_NAMES = ("pronoun", "candidates", "deciding", "completion", "swap", "query", "target")
MARK_PREFIXES = tuple(f"coref_{name}_" for name in MARK_NAMES)
MIN_WORDS = 3  # a pronoun and two candidates
MAX_WORDS = 60  # three strips of clickable words: beyond this they stop being readable
MAX_CHARS = 300  # the sentence box's limit


def markable(text: str) -> bool:
    """Whether ``text`` can be marked as it stands: within the sentence box's limits, with a pronoun that
    has at least two words before it (its candidates)."""
    words = sentence_words(text)
    pronoun = suggest_pronoun(words)
    return len(text) <= MAX_CHARS and MIN_WORDS <= len(words) <= MAX_WORDS and pronoun is not None and pronoun >= 2


def digest(*parts) -> str:
    """A short stable name for ``parts`` (their repr): 12 hex digits of SHA-1."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def mark_key(name: str, text: str, *inputs) -> str:
    """``coref_<name>_<digest of the sentence>[_<digest of the other inputs>]``."""
    if name not in MARK_NAMES:
        raise ValueError(f"mark name must be one of {MARK_NAMES}, got {name!r}")
    return f"coref_{name}_{digest(text)}" + (f"_{digest(*inputs)}" if inputs else "")


def sort_keys(keys: Iterable, text: str, kept_prefixes: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Keys → (to keep, to forget): the marks made on ``text`` and the keys starting with
    ``kept_prefixes`` are kept; marks made on any other sentence are forgotten; other keys are neither."""
    sentence, keep, forget = digest(text), [], []
    for key in keys:
        if not isinstance(key, str):
            continue
        if key.startswith(tuple(kept_prefixes)) or (key.startswith(MARK_PREFIXES) and key.split("_")[2] == sentence):
            keep.append(key)
        elif key.startswith(MARK_PREFIXES):
            forget.append(key)
    return keep, forget


def marks_text(pronoun: int | None, candidates: Iterable[int], deciding: int | None) -> str:
    """The clicked words as a link carries them: ``"pronoun:candidates:deciding"`` word indices, an empty
    part for none (``"8:0,3:"``: no deciding word)."""
    part = lambda index: "" if index is None else str(int(index))  # noqa: E731
    return f"{part(pronoun)}:{','.join(str(int(i)) for i in sorted(candidates))}:{part(deciding)}"


def read_marks(text: str, n_words: int) -> tuple[int | None, list[int], int | None] | None:
    """``marks_text`` back, for a sentence of ``n_words`` words: (pronoun, candidates, deciding), or None
    when it is not marks of such a sentence (a link edited by hand, or made on a longer sentence)."""
    parts = str(text).split(":")
    if len(parts) != 3:
        return None
    try:
        pronoun, deciding = (int(part) if part else None for part in (parts[0], parts[2]))
        candidates = [int(i) for i in parts[1].split(",")] if parts[1] else []
    except ValueError:
        return None
    indices = [i for i in (pronoun, deciding, *candidates) if i is not None]
    if not all(0 <= i < n_words for i in indices) or len(set(candidates)) != len(candidates):
        return None
    return pronoun, sorted(candidates), deciding


def check_choice(pronoun: int | None, candidates: Iterable[int]) -> list[int]:
    """The clicked pronoun and candidates → the candidates in sentence order; ValueError saying what is
    missing when the pronoun is not clicked, fewer than two candidates are, or the pronoun is among them."""
    if pronoun is None:
        raise ValueError("Click the pronoun in the first strip.")
    candidates = sorted(candidates)
    if len(candidates) < 2 or pronoun in candidates:
        raise ValueError("Click at least two candidate words, other than the pronoun.")
    return candidates


def check_before_pronoun(words: Sequence, pronoun: int, candidates: Sequence[int]) -> None:
    """ValueError naming the candidates that come after the pronoun ("When she arrived, Mary thanked
    John"): a causal model's row at the pronoun cannot see a later word, so every head gives it attention
    0 there and a ranking would only compare zeros (ties)."""
    after = [words[i].text for i in candidates if i > pronoun]
    if not after:
        return
    before = [words[i].text for i in candidates if i < pronoun]
    said = (f"{_quoted(after)} {'comes' if len(after) == 1 else 'come'} after “{words[pronoun].text}”"
            + (f" and only {_quoted(before)} before it" if len(before) == 1 else ""))
    raise ValueError(f"{said}. A causal model reads left to right: its row at “{words[pronoun].text}” cannot see "
                     "a later word, so every head's attention from it to a later candidate is 0 and a ranking "
                     "would compare nothing. Click only candidates before the pronoun, at least two.")


def _quoted(names: Sequence[str]) -> str:
    quoted = [f"“{n}”" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


@dataclass(frozen=True)
class Marks:
    """Word indices into ``sentence_words(text)``; the completion is appended after the sentence."""
    pronoun: int
    candidates: tuple[int, ...]
    deciding: int | None
    completion: str

    @property
    def decided_after_pronoun(self) -> bool:
        """A deciding word after the pronoun: the pronoun's row (causal) cannot see it."""
        return self.deciding is not None and self.deciding > self.pronoun

    def query_kinds(self) -> list[str]:
        """Where attention can be read from: the deciding word only when one is marked."""
        return [k for k in QUERY_KINDS if k != "deciding word" or self.deciding is not None]


def same_prefix(ids_a: Sequence[int], ids_b: Sequence[int], row: int) -> bool:
    """Whether two token sequences agree up to and including token ``row`` (their rows there comparable)."""
    return list(ids_a[:row + 1]) == list(ids_b[:row + 1])
