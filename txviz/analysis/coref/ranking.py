"""Coreference heads: which heads look from a pronoun back to its antecedent.

In the spirit of Clark et al. 2019, "What does BERT look at?" (their coreference study): for each labeled
case read the attention row of the pronoun in every head, sum it over each candidate's tokens, and
let the head "predict" the candidate with the most mass. A head's accuracy is the fraction of cases
it gets right (a tie is wrong); its margin is the mean of mass(answer) − max mass(other candidates).
Two baselines need no model: "nearest" (the candidate closest before the pronoun) and "first" (the
candidate that comes first in the text).

A causal model at the pronoun sees only the words before it, so only cases decidable from the left
context (gender, number, animacy agreement) can be resolved there; the built-in set
(``assets/coref/agreement.jsonl``, written by ``txviz.analysis.coref.data``) holds only such cases.

Data: JSONL, one object per line: ``{"text", "pronoun", "candidates", "answer"}`` plus optional
``"pronoun_occurrence"`` (0-based among the pronoun's whole-word matches) and ``"kind"`` (a label).
Words are matched case-sensitively as whole words (``\\b``-style: no word character on either side);
a candidate is its first occurrence, and it covers every token overlapping its characters; the
pronoun's query row is its last token. A candidate that comes after the pronoun is allowed but
flagged: a causal pronoun row gives it zero attention, so if it is the answer every head gets the
case wrong; ``evaluate`` counts such cases in ``n_after_pronoun``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import torch

from txviz.batches import batch_done

BUILTIN_PATH = Path(__file__).resolve().parents[3] / "assets" / "coref" / "agreement.jsonl"
REQUIRED_FIELDS = ("text", "pronoun", "candidates", "answer")
OPTIONAL_FIELDS = ("pronoun_occurrence", "kind")
BOS_CHOICES = ("none", "bos", "sink")
MAX_BATCH_CELLS = 16 * 64 * 64  # B·T² per forward pass: 16 sentences of 64 tokens, ~70 MB of maps for SmolLM2


class CorefDataError(ValueError):
    """A coreference case or data file that cannot be used; the message names the line at fault."""


def word_spans(text: str, word: str) -> list[tuple[int, int]]:
    """Character spans of ``word`` in ``text`` as a whole word, case-sensitive, in order."""
    return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text)]


@dataclass(frozen=True)
class CorefCase:
    """One labeled sentence: ``pronoun`` (at ``pronoun_occurrence``) refers to ``answer``."""

    text: str
    pronoun: str
    candidates: tuple[str, ...]
    answer: str
    pronoun_occurrence: int = 0
    kind: str = ""  # e.g. "gender", "number", "animacy"; only a label

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        for name in ("text", "pronoun", "answer"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise CorefDataError(f"{name!r} must be a non-empty string")
        if any(not isinstance(c, str) or not c for c in self.candidates):
            raise CorefDataError("'candidates' must be a list of non-empty strings")
        if len(self.candidates) < 2:
            raise CorefDataError(f"need at least 2 candidates, got {list(self.candidates)}")
        if len(set(self.candidates)) != len(self.candidates):
            raise CorefDataError(f"candidates repeat: {list(self.candidates)}")
        if self.answer not in self.candidates:
            raise CorefDataError(f"answer {self.answer!r} is not among the candidates {list(self.candidates)}")
        occurrence = self.pronoun_occurrence
        if isinstance(occurrence, bool) or not isinstance(occurrence, int) or occurrence < 0:
            raise CorefDataError(f"'pronoun_occurrence' must be an integer >= 0, got {occurrence!r}")
        self._check_words()

    def _check_words(self) -> None:
        found = len(word_spans(self.text, self.pronoun))
        if found <= self.pronoun_occurrence:
            raise CorefDataError(f"pronoun {self.pronoun!r} occurs {found} time(s) as a whole word in the text; "
                                 f"pronoun_occurrence={self.pronoun_occurrence} needs at least "
                                 f"{self.pronoun_occurrence + 1} (matching is case-sensitive)")
        for candidate in self.candidates:
            if not word_spans(self.text, candidate):
                raise CorefDataError(f"candidate {candidate!r} is not in the text as a whole word "
                                     "(matching is case-sensitive)")
        named = [(self.pronoun, self.pronoun_chars), *zip(self.candidates, self.candidate_chars)]
        for i, (word_a, (start_a, end_a)) in enumerate(named):
            for word_b, (start_b, end_b) in named[i + 1:]:
                if start_a < end_b and start_b < end_a:
                    raise CorefDataError(f"{word_a!r} and {word_b!r} overlap in the text at characters "
                                         f"{max(start_a, start_b)}–{min(end_a, end_b)}")

    @property
    def pronoun_chars(self) -> tuple[int, int]:
        return word_spans(self.text, self.pronoun)[self.pronoun_occurrence]

    @property
    def candidate_chars(self) -> tuple[tuple[int, int], ...]:
        """Each candidate's first whole-word occurrence, in the order of ``candidates``."""
        return tuple(word_spans(self.text, c)[0] for c in self.candidates)

    @property
    def answer_index(self) -> int:
        return self.candidates.index(self.answer)

    @property
    def after_pronoun(self) -> tuple[str, ...]:
        """Candidates whose first occurrence comes after the pronoun: invisible to a causal pronoun row."""
        start = self.pronoun_chars[0]
        return tuple(c for c, (s, _) in zip(self.candidates, self.candidate_chars) if s > start)


# ---- reading JSONL ---------------------------------------------------------------------------------

def _case_from_line(line: str) -> CorefCase:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise CorefDataError(f"malformed JSON: {error.msg} at column {error.colno}") from None
    except RecursionError:  # a case is one flat object: arrays or objects nested thousands deep are no case
        raise CorefDataError("the JSON is nested too deeply to be a case (one object of strings)") from None
    if not isinstance(record, dict):
        raise CorefDataError(f"expected a JSON object, got {type(record).__name__}")
    missing = [f for f in REQUIRED_FIELDS if f not in record]
    if missing:
        raise CorefDataError(f"missing field(s) {', '.join(map(repr, missing))}")
    unknown = sorted(set(record) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        raise CorefDataError(f"unknown field(s) {', '.join(map(repr, unknown))}; "
                             f"allowed: {', '.join(REQUIRED_FIELDS + OPTIONAL_FIELDS)}")
    if not isinstance(record["candidates"], list):
        raise CorefDataError("'candidates' must be a list of non-empty strings")
    if not isinstance(record.get("kind", ""), str):
        raise CorefDataError("'kind' must be a string")
    return CorefCase(**record)


def parse_cases(source: str | Path | Iterable[str]) -> list[CorefCase]:
    """Cases from a JSONL file (a ``str`` or ``Path`` is a path) or from an iterable of lines.

    Blank lines are skipped. Any problem raises CorefDataError naming the file and line.
    """
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"no such coreference data file: {path}")
        if not path.is_file():
            raise CorefDataError(f"{path} is not a file: expected JSONL, one case per line")
        name = str(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as error:
            raise CorefDataError(f"{path} is not UTF-8 text: {error.reason} at byte {error.start}") from None
    else:
        name, lines = "<lines>", list(source)
    cases = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                cases.append(_case_from_line(line))
            except CorefDataError as error:
                raise CorefDataError(f"{name}, line {number}: {error}") from None
    if not cases:
        raise CorefDataError(f"{name}: no cases (expected JSONL, one object per line)")
    return cases


def builtin_cases() -> list[CorefCase]:
    """The labeled set the project ships (gender, number and animacy agreement)."""
    return parse_cases(BUILTIN_PATH)


# ---- from characters to tokens ---------------------------------------------------------------------

@dataclass(frozen=True)
class CaseSpans:
    """A case in token indices: the pronoun's query row and each candidate's tokens."""

    pronoun_row: int
    candidates: tuple[tuple[int, ...], ...]
    answer: int  # index into ``candidates``


def token_span(offsets: Sequence[tuple[int, int]], start: int, end: int,
               special: Sequence[bool] | None = None) -> tuple[int, ...]:
    """Indices of the tokens whose characters overlap [start, end); special and empty tokens never do."""
    return tuple(i for i, (a, b) in enumerate(offsets)
                 if a < end and b > start and b > a and not (special is not None and special[i]))


def word_token_spans(offsets: Sequence[tuple[int, int]], special: Sequence[bool] | None,
                     pronoun: Sequence[int], candidates: Sequence[Sequence[int]]) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """Character spans (start, end) of a pronoun and candidate words → (the pronoun's query row, each
    candidate's token indices). ValueError when a word covers no ordinary token (it lies inside a
    special token such as <|im_end|>, or outside the text)."""
    pronoun_tokens = token_span(offsets, *pronoun, special)
    spans = tuple(token_span(offsets, start, end, special) for start, end in candidates)
    empty = [f"characters {a}–{b}" for (a, b), span in zip([pronoun, *candidates], [pronoun_tokens, *spans])
             if not span]
    if empty:
        raise ValueError(f"no ordinary token covers {', '.join(empty)} (inside a special token?)")
    return pronoun_tokens[-1], spans


def locate(case: CorefCase, encoding) -> CaseSpans:
    """Token spans of ``case`` in ``encoding`` (anything with ``offsets`` and optionally ``special``)."""
    offsets, special = list(encoding.offsets), getattr(encoding, "special", None)
    pronoun_tokens = token_span(offsets, *case.pronoun_chars, special)
    spans = tuple(token_span(offsets, start, end, special) for start, end in case.candidate_chars)
    if not pronoun_tokens or not all(spans):
        raise CorefDataError(f"a word of {case.text!r} covers no token: are the offsets character offsets?")
    pronoun_row = pronoun_tokens[-1]
    _check_disjoint(pronoun_row, spans, labels=case.candidates)
    return CaseSpans(pronoun_row, spans, case.answer_index)


def _check_disjoint(pronoun_row: int, spans: Sequence[Sequence[int]], labels: Sequence[str]) -> None:
    seen: dict[int, str] = {}
    for label, span in zip(labels, spans):
        for index in span:
            if index == pronoun_row:
                raise ValueError(f"candidate {label!r} contains the pronoun's token {index}")
            if index in seen:
                raise ValueError(f"candidates {seen[index]!r} and {label!r} share token {index}")
            seen[index] = label


# ---- scoring heads ---------------------------------------------------------------------------------

def rank_heads(probs: torch.Tensor, pronoun_row: int, candidate_spans: Sequence[Sequence[int]]) -> torch.Tensor:
    """probs (L, H, T, S), the pronoun's row, each candidate's token indices → mass (L, H, C):
    the attention from the pronoun to each candidate, summed over the candidate's tokens."""
    if probs.dim() != 4:
        raise ValueError(f"probs must be (layers, heads, T, S), got shape {tuple(probs.shape)}")
    n_rows, n_keys = probs.shape[-2:]
    if not 0 <= pronoun_row < n_rows:
        raise ValueError(f"pronoun row {pronoun_row} out of range: {n_rows} tokens")
    for span in candidate_spans:
        if not span or not all(0 <= i < n_keys for i in span):
            raise ValueError(f"candidate span {list(span)} is empty or out of range (0..{n_keys - 1})")
    return _row_masses(probs[..., pronoun_row, :], candidate_spans)


def _row_masses(row: torch.Tensor, candidate_spans: Sequence[Sequence[int]]) -> torch.Tensor:
    """One query row's attention (L, H, S) → its mass on each candidate (L, H, C). A candidate's tokens
    past S get nothing: a causal row gives its future exact zeros, and adding 0.0 is exact."""
    row = row.float()
    n_keys = row.shape[-1]
    return torch.stack([row[..., [i for i in span if i < n_keys]].sum(-1) for span in candidate_spans], dim=-1)


def answer_margin(mass: torch.Tensor, answer: int) -> torch.Tensor:
    """mass (..., C) → mass[answer] − max over the other candidates (...): > 0 means right, 0 is a tie."""
    others = torch.cat([mass[..., :answer], mass[..., answer + 1:]], dim=-1)
    return mass[..., answer] - others.max(dim=-1).values


def baseline_accuracy(cases: Sequence[CorefCase]) -> dict[str, float]:
    """The no-model guesses: "nearest" (closest candidate before the pronoun) and "first" (first in the text)."""
    nearest = first = 0
    for case in cases:
        starts = [start for start, _ in case.candidate_chars]
        before = [i for i, start in enumerate(starts) if start < case.pronoun_chars[0]]
        nearest += bool(before) and max(before, key=starts.__getitem__) == case.answer_index
        first += min(range(len(starts)), key=starts.__getitem__) == case.answer_index
    return {"nearest": nearest / len(cases), "first": first / len(cases)}


def _model_and_tokenizer(source) -> tuple[torch.nn.Module, object, str]:
    if hasattr(source, "model") and hasattr(source, "tokenizer"):  # a LoadedModel
        model, tokenizer, name = source.model, source.tokenizer, getattr(source, "source", "")
    else:
        model, tokenizer = source
        name = model.config.name
    if tokenizer is None:
        raise ValueError("this model has no tokenizer: coreference needs text")
    return model, tokenizer, name


def _batches(lengths: Sequence[int], batch_size: int) -> Iterable[list[int]]:
    """Case indices grouped by length, at most ``batch_size`` per batch and B·T² ≤ MAX_BATCH_CELLS
    (the attention maps grow with T²: long sentences go alone)."""
    batch: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batch and (len(batch) == batch_size or (len(batch) + 1) * lengths[i] ** 2 > MAX_BATCH_CELLS):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def _pronoun_masses(model, encodings, spans, batch_size: int) -> Iterable[tuple[int, torch.Tensor]]:
    """Yield (case index, (L, H, C) mass). Only the pronoun's row is read, and in a causal model no
    token after the pronoun changes it: each sentence runs up to its pronoun's token only (~28% fewer
    tokens on the built-in set). Cases run in right-padded batches: a causal model's rows for the real
    tokens never see the padding after them, so batching changes nothing but the speed."""
    from txviz.capture.trace import trace

    lengths = [s.pronoun_row + 1 for s in spans]  # what each case runs: its tokens up to the pronoun's
    batches = list(_batches(lengths, batch_size))
    for done, batch in enumerate(batches, start=1):
        ids = torch.zeros(len(batch), max(lengths[i] for i in batch), dtype=torch.long)  # (B, T), 0-padded
        for b, i in enumerate(batch):
            ids[b, :lengths[i]] = torch.as_tensor(list(encodings[i].ids)[:lengths[i]])
        probs = trace(model, ids, capture=("attn_probs",))["attn_probs"]  # (L, B, H, T, T)
        for b, i in enumerate(batch):
            row = spans[i].pronoun_row  # the last real row: its keys are the case's tokens 0..row
            yield i, _row_masses(probs[:, b, :, row, :row + 1], spans[i].candidates)
        batch_done(done, len(batches))


def case_margins(source, cases: Sequence[CorefCase], *, bos: str = "sink", batch_size: int = 16) -> torch.Tensor:
    """(N, L, H): for each case and head, mass(answer) − max mass(other candidates); > 0 is right."""
    if bos not in BOS_CHOICES:
        raise ValueError(f"bos must be one of {BOS_CHOICES}, got {bos!r}")
    model, tokenizer, _ = _model_and_tokenizer(source)
    encodings = [tokenizer.encode(case.text, bos=bos) for case in cases]
    spans = []
    for i, (case, encoding) in enumerate(zip(cases, encodings)):
        try:
            spans.append(locate(case, encoding))
        except ValueError as error:
            raise CorefDataError(f"case {i} ({case.text!r}): {error}") from None
    margins = torch.zeros(len(cases), model.config.n_layers, model.config.n_heads)
    for i, mass in _pronoun_masses(model, encodings, spans, batch_size):
        margins[i] = answer_margin(mass, spans[i].answer)
    return margins


def evaluate(source, cases: Sequence[CorefCase], *, bos: str = "sink", batch_size: int = 16) -> dict:
    """Score every head on ``cases``. ``source`` is a LoadedModel or a (model, tokenizer) pair.

    Returns ``{"model", "bos", "n_cases", "n_after_pronoun", "baselines": {"nearest", "first"},
    "heads": [{"layer", "head", "accuracy", "margin"}, ...], "by_kind"}`` with heads best first
    (accuracy, then margin); ``by_kind`` repeats n_cases, baselines and the 3 best heads per "kind".
    """
    cases = list(cases)
    if not cases:
        raise ValueError("no cases to evaluate")
    margins = case_margins(source, cases, bos=bos, batch_size=batch_size)  # (N, L, H)
    by_kind = {}
    for kind in sorted({case.kind for case in cases if case.kind}):
        rows = [i for i, case in enumerate(cases) if case.kind == kind]
        by_kind[kind] = {"n_cases": len(rows), "baselines": _baselines([cases[i] for i in rows]),
                         "best": _sorted_heads(margins[rows])[:3]}
    return {
        "model": _model_and_tokenizer(source)[2], "bos": bos, "n_cases": len(cases),
        "n_after_pronoun": sum(bool(case.after_pronoun) for case in cases),
        "baselines": _baselines(cases), "heads": _sorted_heads(margins), "by_kind": by_kind,
    }


def _baselines(cases: Sequence[CorefCase]) -> dict[str, float]:
    return {name: round(value, 6) for name, value in baseline_accuracy(cases).items()}


def _sorted_heads(margins: torch.Tensor) -> list[dict]:
    """margins (N, L, H) → one row per head, best first: accuracy (ties are wrong), then mean margin."""
    accuracy, margin = (margins > 0).double().mean(0), margins.double().mean(0)
    order = sorted(((-float(accuracy[layer, head]), -float(margin[layer, head]), layer, head)
                    for layer in range(margins.shape[1]) for head in range(margins.shape[2])))
    return [{"layer": layer, "head": head, "accuracy": round(-acc, 6), "margin": round(-mar, 6)}
            for acc, mar, layer, head in order]


# ---- one sentence, for the app ---------------------------------------------------------------------

@dataclass(frozen=True)
class HeadScore:
    layer: int
    head: int
    mass: tuple[float, ...]  # attention from the pronoun to each candidate
    margin: float  # mass[target] − max over the other candidates
    predicted: int | None  # the candidate with the most mass; None on a tie


@dataclass(frozen=True)
class SentenceRanking:
    tokens: tuple[str, ...]
    pronoun_index: int
    candidate_spans: tuple[tuple[int, ...], ...]
    target: int  # the candidate the heads are ranked for
    heads: tuple[HeadScore, ...]  # best first: by margin for ``target``


def score_heads(probs: torch.Tensor, pronoun_index: int, candidate_spans: Sequence[Sequence[int]], *,
                target: int = 0) -> tuple[HeadScore, ...]:
    """probs (L, H, T, T) of layers 0…L−1 → every head, ranked by how much more it attends from the
    pronoun to candidate ``target`` than to the best other one. Spans after the pronoun get no attention."""
    spans = tuple(tuple(int(i) for i in span) for span in candidate_spans)
    if len(spans) < 2:
        raise ValueError(f"need at least 2 candidate spans, got {len(spans)}")
    if not 0 <= target < len(spans):
        raise ValueError(f"target {target} out of range: {len(spans)} candidates")
    _check_disjoint(pronoun_index, spans, labels=[f"#{i}" for i in range(len(spans))])
    mass = rank_heads(probs, pronoun_index, spans)  # (L, H, C)
    margin = answer_margin(mass, target)  # (L, H)
    top2 = mass.topk(2, dim=-1)
    tie = top2.values[..., 0] == top2.values[..., 1]
    scores = [HeadScore(layer, head, tuple(round(float(m), 6) for m in mass[layer, head]),
                        round(float(margin[layer, head]), 6),
                        None if tie[layer, head] else int(top2.indices[layer, head, 0]))
              for layer in range(mass.shape[0]) for head in range(mass.shape[1])]
    return tuple(sorted(scores, key=lambda s: (-s.margin, s.layer, s.head)))


def rank_for_sentence(source, text: str, pronoun_index: int, candidate_spans: Sequence[Sequence[int]], *,
                      bos: str = "sink", target: int = 0) -> SentenceRanking:
    """Trace ``text`` (token indices refer to ``tokenizer.encode(text, bos=bos)``) and rank every head."""
    from txviz.capture.trace import trace

    model, tokenizer, _ = _model_and_tokenizer(source)
    encoding = tokenizer.encode(text, bos=bos)
    probs = trace(model, torch.as_tensor(list(encoding.ids)), capture=("attn_probs",))["attn_probs"][:, 0]
    heads = score_heads(probs, pronoun_index, candidate_spans, target=target)
    spans = tuple(tuple(int(i) for i in span) for span in candidate_spans)
    return SentenceRanking(tuple(encoding.tokens), pronoun_index, spans, target, heads)
