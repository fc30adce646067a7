"""The built-in coreference set: a small seeded generator and its output, assets/coref/agreement.jsonl.

A causal model at the pronoun sees only the words before it, so every case is decidable from the
left context by agreement alone (the tutorial's "it" example needs world knowledge; these do not):

* ``gender``: he/she/him/her with two people of different gender (names or nouns such as "aunt").
* ``number``: it/they with a singular and a plural object.
* ``animacy``: it vs he/she with one person and one object.

Both candidates come before the pronoun, and in each kind the answer is the first candidate in
exactly half of the cases and the nearest in the other half, so the "first" and "nearest"
baselines sit at 0.5. All sentences are written for this project (Apache-2.0 with txviz).

    python -m txviz.analysis.coref.data          # rewrite the shipped file (a test checks it matches)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from txviz.analysis.coref.ranking import BUILTIN_PATH, CorefCase, word_spans

SEED = 2019  # Clark et al.'s year; any fixed number would do
CASES_PER_KIND = 80

FEMALE_NAMES = ("Mary", "Anna", "Sarah", "Emma", "Laura", "Alice", "Julia", "Helen",
                "Rachel", "Emily", "Grace", "Lucy", "Susan", "Linda", "Kate", "Jane")
MALE_NAMES = ("John", "David", "Peter", "James", "Mark", "Paul", "Robert", "Thomas",
              "Daniel", "Michael", "George", "Henry", "Frank", "Jack", "Simon", "Adam")
GENDERED_NOUNS = (("woman", "man"), ("girl", "boy"), ("mother", "father"), ("lady", "gentleman"),
                  ("aunt", "uncle"), ("queen", "king"), ("grandmother", "grandfather"), ("princess", "prince"))
SINGULAR_OBJECTS = ("lamp", "teapot", "box", "bottle", "basket", "clock", "mirror", "bag",
                    "cup", "plate", "kettle", "vase", "jar", "bucket", "radio", "suitcase")
PLURAL_OBJECTS = ("books", "stones", "candles", "shoes", "papers", "apples", "coins", "bowls",
                  "bricks", "pencils", "spoons", "glasses", "towels", "keys", "tools", "blankets")

# {A} and {B} are the first and second candidate, {p}/{P} the pronoun (lower/capitalized), {c} the
# continuation after it (which the model at the pronoun cannot see). Continuations are keyed by the
# pronoun's class: "person", "it", "they".
GENDER_TEMPLATES = (
    ("{A} called {B} because {p} {c}.", ("was worried about the trip", "needed some help", "had good news")),
    ("{A} waited for {B} at the station, but {p} {c}.", ("was still tired", "did not say a word", "looked unhappy")),
    ("{A} met {B} in the park. {P} {c}.", ("was walking a small dog", "had a new coat", "seemed cheerful")),
    ("When {A} visited {B}, {p} {c}.", ("brought some flowers", "told a long story", "made a pot of tea")),
    ("{A} sent {B} a letter, and later {p} {c}.", ("wrote another one", "felt a little sad", "went for a walk")),
    ("{A} helped {B} in the garden, so {p} {c}.", ("was tired by evening", "stayed for dinner", "slept well")),
    ("{A} argued with {B}, and the neighbours heard {p} {c}.", ("shouting", "crying", "slam the door")),
    ("{A} asked {B} a question, but nobody answered {p} {c}.", ("at first", "for a while", "that day")),
)
NUMBER_TEMPLATES = (
    ("The {A} stood next to the {B}, and {p} {c}.", {"it": ("was covered in dust",), "they": ("were covered in dust",)}),
    ("We moved the {A} away from the {B} because {p} {c}.", {"it": ("was in the way",), "they": ("were in the way",)}),
    ("Someone left the {A} near the {B}. {P} {c}.", {"it": ("was still there the next day",),
                                                     "they": ("were still there the next day",)}),
    ("The {A} fell onto the {B}, and {p} {c}.", {"it": ("broke at once", "made a loud noise"),
                                                 "they": ("broke at once", "made a loud noise")}),
    ("I put the {A} beside the {B} so that {p} {c}.", {"it": ("would stay dry",), "they": ("would stay dry",)}),
    ("After the storm, the {A} lay under the {B}, and {p} {c}.", {"it": ("was soaked",), "they": ("were soaked",)}),
)
PERSON_FIRST_TEMPLATES = (
    ("{A} dropped the {B}, and {p} {c}.", {"person": ("laughed", "looked embarrassed"),
                                           "it": ("broke into pieces", "rolled away")}),
    ("{A} found the {B} in the attic. {P} {c}.", {"person": ("was very pleased", "called a friend"),
                                                  "it": ("was covered in dust", "looked very old")}),
    ("{A} carried the {B} upstairs because {p} {c}.", {"person": ("wanted to help", "was strong"),
                                                       "it": ("belonged in the bedroom", "was needed there")}),
)
OBJECT_FIRST_TEMPLATES = (
    ("The {A} was lying next to {B}, and {p} {c}.", {"person": ("did not notice", "was asleep"),
                                                     "it": ("was still warm", "looked new")}),
    ("The {A} fell near {B}, and {p} {c}.", {"person": ("jumped back", "shouted"),
                                             "it": ("broke", "rolled under the bed")}),
    ("When the {A} was given to {B}, {p} {c}.", {"person": ("was very happy", "said thank you"),
                                                 "it": ("was wrapped in paper", "was heavy")}),
)


def _person(rng: random.Random, female: bool) -> tuple[str, str]:
    """(mention, candidate word) for one person: a name, or "the" and a noun of clear gender."""
    if rng.random() < 0.5:
        name = rng.choice(FEMALE_NAMES if female else MALE_NAMES)
        return name, name
    noun = rng.choice(GENDERED_NOUNS)[0 if female else 1]
    return f"the {noun}", noun


def _fill(template: str, first: str, second: str, pronoun: str, continuation: str) -> tuple[str, str]:
    """(text, the pronoun as written in it): sentence starts are capitalized."""
    text = template.format(A=first, B=second, p=pronoun, P=pronoun.capitalize(), c=continuation)
    return text[0].upper() + text[1:], pronoun.capitalize() if "{P}" in template else pronoun


def _record(written: tuple[str, str], candidates: tuple[str, str], answer: str, kind: str) -> dict:
    text, pronoun = written
    if len(word_spans(text, pronoun)) != 1:  # the pronoun must be its own first occurrence
        raise AssertionError(f"pronoun {pronoun!r} is not unique in {text!r}")
    return {"text": text, "pronoun": pronoun, "candidates": list(candidates), "answer": answer, "kind": kind}


def _gender_case(rng: random.Random, answer_first: bool, answer_female: bool) -> dict:
    template, continuations = rng.choice(GENDER_TEMPLATES)
    first_female = answer_female if answer_first else not answer_female
    first_mention, first = _person(rng, first_female)
    second_mention, second = _person(rng, not first_female)
    objective = "heard {p}" in template or "answered {p}" in template
    pronoun = ("her" if objective else "she") if answer_female else ("him" if objective else "he")
    written = _fill(template, first_mention, second_mention, pronoun, rng.choice(continuations))
    return _record(written, (first, second), first if answer_first else second, "gender")


def _number_case(rng: random.Random, answer_first: bool, answer_plural: bool) -> dict:
    template, continuations = rng.choice(NUMBER_TEMPLATES)
    first_plural = answer_plural if answer_first else not answer_plural
    first = rng.choice(PLURAL_OBJECTS if first_plural else SINGULAR_OBJECTS)
    second = rng.choice(SINGULAR_OBJECTS if first_plural else PLURAL_OBJECTS)
    pronoun = "they" if answer_plural else "it"
    written = _fill(template, first, second, pronoun, rng.choice(continuations[pronoun]))
    return _record(written, (first, second), first if answer_first else second, "number")


def _animacy_case(rng: random.Random, answer_first: bool, person_first: bool) -> dict:
    template, continuations = rng.choice(PERSON_FIRST_TEMPLATES if person_first else OBJECT_FIRST_TEMPLATES)
    female = rng.random() < 0.5
    mention, person = _person(rng, female)
    thing = rng.choice(SINGULAR_OBJECTS)
    answer_is_person = answer_first == person_first
    pronoun = ("she" if female else "he") if answer_is_person else "it"
    continuation = rng.choice(continuations["person" if answer_is_person else "it"])
    first, second = (mention, thing) if person_first else (thing, mention)
    candidates = (person, thing) if person_first else (thing, person)
    written = _fill(template, first, second, pronoun, continuation)
    return _record(written, candidates, person if answer_is_person else thing, "animacy")


def generate_cases(seed: int = SEED, per_kind: int = CASES_PER_KIND) -> list[dict]:
    """``per_kind`` distinct cases of each kind; answer first in exactly half, the second factor
    (the answer's gender, number, or whether the person comes first) crossed with it evenly."""
    rng = random.Random(seed)
    makers = {"gender": _gender_case, "number": _number_case, "animacy": _animacy_case}
    records, texts = [], set()
    for make in makers.values():
        for i in range(per_kind):
            answer_first, other_factor = i % 2 == 0, (i // 2) % 2 == 0
            record = make(rng, answer_first, other_factor)
            while record["text"] in texts:
                record = make(rng, answer_first, other_factor)
            CorefCase(**record)  # every generated case must pass the reader's checks
            texts.add(record["text"])
            records.append(record)
    return records


def to_jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def main(argv: list[str] | None = None) -> int:
    path = Path(argv[0]) if argv else BUILTIN_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_jsonl(generate_cases()), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
