"""A procedurally generated English story corpus for the lab's tiny models: seeded, no external text.

Each story has two people of clear and different gender (he/she, him/her, his/her) with a first name
and a surname, a pet (it), a group (they) and one coloured belonging per person. Sentences refer
back with pronouns, and names, pets and "<colour> <object>" phrases recur, so three kinds of head
have something to learn:

* previous-token heads (every bigram of the templates);
* induction heads (Olsson et al. 2022, "In-context Learning and Induction Heads"): surnames are drawn
  per story, so after "Mary" only the story's own earlier "Mary Parker" predicts "Parker"; likewise
  "her red" → "kite", a pet's name after "called", and a memory game in which one person says a list
  of "<colour> <object>" pairs and the other says it back;
* pronoun-resolving heads: "She picked up her …" needs the gender of the person being talked about,
  and is followed by *her* colour and object, which only the name the pronoun stands for decides
  (the tutorial's "it" example of coreference, with agreement instead of world knowledge).

Every story is drawn from its own ``random.Random(f"txviz-lab:{seed}:{split}:{index}")`` (string
seeds are hashed with SHA-512, so the text does not depend on PYTHONHASHSEED or the platform); the
"train" and "val" splits are disjoint streams. All words and templates are written for txviz
(Apache-2.0 with the project).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

DOCUMENT_SEPARATOR = "<|endoftext|>"

FEMALE_NAMES = ("Mary", "Anna", "Sarah", "Emma", "Laura", "Alice", "Julia", "Helen",
                "Rachel", "Emily", "Grace", "Lucy", "Susan", "Linda", "Kate", "Jane")
MALE_NAMES = ("John", "David", "Peter", "James", "Mark", "Paul", "Robert", "Thomas",
              "Daniel", "Michael", "George", "Henry", "Frank", "Jack", "Simon", "Adam")
SURNAMES = ("Baker", "Carter", "Dixon", "Ellis", "Fisher", "Gray", "Harris", "Jones",
            "Kelly", "Lewis", "Mason", "Nolan", "Parker", "Reid", "Turner", "Walsh")
OBJECTS = ("kite", "ball", "hat", "bag", "box", "cup", "book", "lamp",
           "boat", "drum", "scarf", "kettle", "basket", "bottle", "clock", "bucket")
COLOURS = ("red", "blue", "green", "yellow", "white", "black", "brown", "purple")
ANIMALS = ("dog", "cat", "rabbit", "horse", "goat", "pony", "parrot", "hamster")
PET_NAMES = ("Pip", "Max", "Bella", "Rex", "Milo", "Daisy", "Toby", "Luna",
             "Coco", "Rusty", "Poppy", "Ziggy", "Nala", "Bruno", "Tilly", "Biscuit")
GROUPS = ("children", "twins", "farmers", "neighbours", "teachers", "sailors", "geese", "ducks")
GROUP_DOINGS = ("singing a song", "playing a game", "eating lunch", "laughing loudly",
                "looking for shells", "building a wall", "sitting in a row", "waiting for the bus")
PLACES = ("park", "farm", "river", "market", "garden", "beach", "forest", "village", "lake", "hill")
HIDING_PLACES = ("bed", "table", "stairs", "tree", "bench", "door")
FOODS = ("bread", "carrots", "apples", "seeds", "milk", "cheese")
GAME_ITEMS = 5  # "<colour> <object>" pairs said in a memory game and said back in the same order
# A feeling and what it makes a person do (the verb phrase follows "so he/she").
FEELINGS = (("tired", "went to sleep early"), ("hungry", "ate some bread"), ("happy", "sang a song"),
            ("cold", "put on a coat"), ("bored", "read a book"), ("thirsty", "drank some water"))


@dataclass(frozen=True)
class CorpusSettings:
    """What ``stories`` draws. ``n_train`` stories feed training, ``n_val`` held-out ones evaluation."""

    seed: int = 0
    n_train: int = 20000
    n_val: int = 400
    min_events: int = 3
    max_events: int = 6

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Person:
    name: str
    female: bool
    colour: str
    thing: str

    @property
    def subj(self) -> str:
        return "she" if self.female else "he"

    @property
    def obj(self) -> str:
        return "her" if self.female else "him"

    @property
    def poss(self) -> str:
        return "her" if self.female else "his"

    @property
    def item(self) -> str:
        return f"{self.colour} {self.thing}"


@dataclass(frozen=True)
class Cast:
    people: tuple[Person, Person]
    animal: str
    pet: str
    group: str
    place: str


def _cast(rng: random.Random) -> Cast:
    female_first = rng.random() < 0.5
    colours = rng.sample(COLOURS, 2)
    things = rng.sample(OBJECTS, 2)
    surnames = rng.sample(SURNAMES, 2)
    names = (f"{rng.choice(FEMALE_NAMES)} {surnames[0]}", f"{rng.choice(MALE_NAMES)} {surnames[1]}")
    first = Person(names[0 if female_first else 1], female_first, colours[0], things[0])
    second = Person(names[1 if female_first else 0], not female_first, colours[1], things[1])
    return Cast((first, second), rng.choice(ANIMALS), rng.choice(PET_NAMES), rng.choice(GROUPS),
                rng.choice(PLACES))


def _intro(c: Cast) -> list[str]:
    a, b = c.people
    return [f"{a.name} and {b.name} lived near the {c.place}.",
            f"{a.name} had a {a.item}, and {b.name} had a {b.item}.",
            f"They also had a {c.animal} called {c.pet}."]


# ---- events: each takes the cast, an actor, the other person and the rng, and returns sentences ----
def _find(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    return [f"One day {x.name} could not find {x.poss} {x.item}.",
            f"{x.subj.capitalize()} looked under the {rng.choice(HIDING_PLACES)}, but it was not there.",
            f"At last {c.pet} found the {x.thing}, and {x.name} took it back."]


def _pet(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    return [f"{x.name} called {c.pet}, and the {c.animal} ran to {x.obj}.",
            f"{x.subj.capitalize()} gave it some {rng.choice(FOODS)}."]


def _group(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    place = rng.choice(PLACES)
    return [f"{x.name} saw the {c.group} near the {place}.",
            f"They were {rng.choice(GROUP_DOINGS)}, and {x.subj} waved at them."]


def _lend(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    return [f"{x.name} gave {x.poss} {x.item} to {y.name}.",
            f"{y.subj.capitalize()} said thank you to {x.obj}, and later {y.subj} gave it back."]


def _feeling(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    feeling, action = rng.choice(FEELINGS)
    return [f"{x.name} was {feeling}, so {x.subj} {action}."]


def _carry(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    return [f"Then {x.name} went to the {rng.choice(PLACES)}.",
            f"{x.subj.capitalize()} took {x.poss} {x.item} and {c.pet} with {x.obj}."]


def _play(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    return [f"{x.name} and {y.name} played with the {c.animal} by the {c.place}.",
            f"They laughed when {c.pet} jumped over the {x.thing}."]


def _game(c: Cast, x: Person, y: Person, rng: random.Random) -> list[str]:
    pairs = zip(rng.sample(COLOURS, GAME_ITEMS), rng.sample(OBJECTS, GAME_ITEMS))  # no colour twice
    things = ", ".join(f"{colour} {thing}" for colour, thing in pairs)
    return [f"{x.name} and {y.name} played a memory game.", f"{x.name} said {things}.",
            f"{y.name} said it back: {things}."]


EVENTS = (_find, _pet, _group, _lend, _feeling, _carry, _play, _game)


def _ending(c: Cast, rng: random.Random) -> list[str]:
    a, b = c.people
    return [f"In the evening {a.name} and {b.name} went home.",
            f"{c.pet} slept by the door, and {b.name} put {b.poss} {b.item} on the shelf."]


def story(seed: int, split: str, index: int, settings: CorpusSettings = CorpusSettings()) -> str:
    """One story, reproducible from (seed, split, index) alone."""
    rng = random.Random(f"txviz-lab:{seed}:{split}:{index}")
    cast = _cast(rng)
    sentences = _intro(cast)
    for _ in range(rng.randint(settings.min_events, settings.max_events)):
        x, y = cast.people if rng.random() < 0.5 else cast.people[::-1]
        sentences += rng.choice(EVENTS)(cast, x, y, rng)
    sentences += _ending(cast, rng)
    return " ".join(sentences)


def stories(split: str, settings: CorpusSettings = CorpusSettings()) -> list[str]:
    """The ``train`` or ``val`` stories of ``settings``."""
    counts = {"train": settings.n_train, "val": settings.n_val}
    if split not in counts:
        raise ValueError(f"unknown split {split!r}; choose 'train' or 'val'")
    return [story(settings.seed, split, i, settings) for i in range(counts[split])]


def sample_text(index: int = 0, n_sentences: int = 3, settings: CorpusSettings = CorpusSettings()) -> str:
    """The first ``n_sentences`` sentences of held-out story ``index``: text every zoo tokenizer knows
    word for word (the vocabulary is the corpus's), for a prompt the zoo's models can read."""
    sentences = story(settings.seed, "val", index % settings.n_val, settings).split(". ")
    return ". ".join(sentences[:n_sentences]).rstrip(".") + "."


def join_documents(texts: list[str]) -> str:
    """Stories as one stream, each opened by the separator (the sink/BOS the model sees first)."""
    return "".join(DOCUMENT_SEPARATOR + text for text in texts)
