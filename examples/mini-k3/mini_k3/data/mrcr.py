"""MRCR-format rows: a chat of "write a {form} about {topic}" requests and short answers.

Format (openai/mrcr): ``prompt`` is a JSON string of chat messages whose last user message asks
to prepend ``random_string_to_prepend`` to the k-th (1-indexed) answer to one request that occurs
``n_needles`` times; ``answer`` is that string followed by the k-th answer; ``desired_msg_index``
is the index of that answer in the message list; ``total_messages`` and ``n_chars`` describe the
prompt. Graded by the official rule (see `grade`).

What makes it learnable by a ~7M-parameter byte model in minutes: every answer starts with a
header naming the request and which occurrence of it this is ("poem 3 about tapirs: ..."), and
its 4-6 words are made-up words used nowhere else in the chat. The model still has to read the
whole context, find the one matching header among up to ~50 answers (and up to 8 near-identical
needles) and copy the words that follow it. Because each word appears once per chat, the words
cannot be guessed from frequencies, only found: a grade above what the header alone earns (~0.53)
means the model copied. (The first shipped sets drew words from a 48-word list; a model that
copied nothing still got them about one word in 48.)
"""

from __future__ import annotations

import difflib
import json
import random
import string
from dataclasses import dataclass

FORMS = ("poem", "haiku", "story", "riddle", "song", "letter", "joke", "essay", "limerick", "sonnet",
         "speech", "fable")
TOPICS = ("tapirs", "otters", "glaciers", "lanterns", "comets", "harbors", "violins", "deserts",
          "beetles", "castles", "rivers", "orchards", "puffins", "tunnels", "volcanoes", "meadows",
          "robots", "bakers", "islands", "mirrors", "falcons", "gardens", "canyons", "engines",
          "sailors", "forests", "clocks", "dragons", "pianos", "bridges", "wolves", "lighthouses",
          "maps", "storms", "coral", "pebbles", "kites", "moths", "ferries", "quarries")
MAX_WORDS_PER_ANSWER = 6


def _made_up_words(n: int, seed: int = 7) -> tuple[str, ...]:
    """``n`` distinct pronounceable words of 2-3 consonant-vowel syllables ("bavoki"), fixed by ``seed``."""
    rng, words = random.Random(seed), set()
    while len(words) < n:
        words.add("".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3))))
    return tuple(sorted(words))


# enough for the longest chats (~55 pairs x 6 words) to use each word at most once
WORDS = _made_up_words(640)
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}
LENGTH_BINS = ((256, 1024), (1025, 2048), (2049, 3700))  # n_chars ranges (prompt characters)
N_NEEDLES = (2, 4, 8)


def ordinal(k: int) -> str:
    return ORDINALS.get(k, f"{k}th")


@dataclass(frozen=True)
class MrcrRow:
    prompt: str
    answer: str
    random_string_to_prepend: str
    n_needles: int
    desired_msg_index: int
    total_messages: int
    n_chars: int

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def _answer(rng: random.Random, form: str, topic: str, occurrence: int, unused_words: list[str]) -> str:
    words = " ".join(unused_words.pop() for _ in range(rng.randint(4, MAX_WORDS_PER_ANSWER)))
    return f"{form} {occurrence} about {topic}: {words}"


def make_row(rng: random.Random, n_needles: int, target_chars: int) -> MrcrRow:
    """One row whose prompt has about ``target_chars`` characters (never fewer than the needles need)."""
    requests = [(f, t) for f in FORMS for t in TOPICS]
    rng.shuffle(requests)
    needle = requests[0]
    distractors = iter(requests[1:])
    # choose how many request/answer pairs fit the length, then where the needles go
    pair_chars = 25 + 45  # rough size of one request + answer
    n_pairs = max(n_needles + 1, round(target_chars / pair_chars))
    needle_slots = sorted(rng.sample(range(n_pairs), n_needles))
    if n_pairs * MAX_WORDS_PER_ANSWER > len(WORDS):
        raise ValueError(f"{n_pairs} request/answer pairs need more than the {len(WORDS)} made-up words")
    unused_words = rng.sample(WORDS, n_pairs * MAX_WORDS_PER_ANSWER)
    messages: list[dict[str, str]] = []
    needle_msg_indices: list[int] = []
    seen = 0
    for i in range(n_pairs):
        if i in needle_slots:
            seen += 1
            form, topic = needle
            occurrence = seen
            needle_msg_indices.append(len(messages) + 1)
        else:
            form, topic = next(distractors)
            occurrence = 1
        messages.append({"role": "user", "content": f"write a {form} about {topic}"})
        messages.append({"role": "assistant", "content": _answer(rng, form, topic, occurrence, unused_words)})
    k = rng.randint(1, n_needles)
    random_string = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))
    form, topic = needle
    messages.append({
        "role": "user",
        "content": f"Prepend {random_string} to the {ordinal(k)} (1 indexed) {form} about {topic}. "
                   "Do not include any other text in your response.",
    })
    desired = needle_msg_indices[k - 1]
    return MrcrRow(
        prompt=json.dumps(messages),
        answer=random_string + messages[desired]["content"],
        random_string_to_prepend=random_string,
        n_needles=n_needles,
        desired_msg_index=desired,
        total_messages=len(messages),
        n_chars=sum(len(m["content"]) for m in messages),
    )


def make_row_in_bin(rng: random.Random, n_needles: int, bin_index: int) -> MrcrRow:
    """A row whose ``n_chars`` falls inside ``LENGTH_BINS[bin_index]`` (resampled until it does)."""
    lo, hi = LENGTH_BINS[bin_index]
    while True:
        row = make_row(rng, n_needles, rng.randint(lo, hi))
        if lo <= row.n_chars <= hi:
            return row


def length_bin(n_chars: int) -> str:
    """The bin label of a row, e.g. ``"0-1024"``."""
    for lo, hi in LENGTH_BINS:
        if n_chars <= hi:
            return f"{0 if lo == LENGTH_BINS[0][0] else lo - 1}-{hi}"
    return f">{LENGTH_BINS[-1][1]}"


def generate(seed: int, per_bin: int) -> list[MrcrRow]:
    """``per_bin`` rows in each length bin, n_needles cycling through 2, 4, 8."""
    rng = random.Random(seed)
    rows = []
    for b in range(len(LENGTH_BINS)):
        for i in range(per_bin):
            rows.append(make_row_in_bin(rng, N_NEEDLES[i % len(N_NEEDLES)], b))
    return rows


def messages_of(row: dict[str, object]) -> list[dict[str, str]]:
    return json.loads(str(row["prompt"]))


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The official MRCR grade: 0 without the prefix, else SequenceMatcher ratio without it."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(difflib.SequenceMatcher(None, response, answer).ratio())
