"""JSON-output prompts: describe an entity as a JSON object; each row carries its JSON schema.

Rows have ``prompt`` (the instruction, naming the keys and types), ``schema`` (a JSON Schema
object, all keys required, no others allowed) and ``answer`` (a reference object as JSON text).
Graded by whether the response parses and validates against the schema.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

NAMES = ("Alice", "Bruno", "Chen", "Dara", "Emeka", "Freya", "Goran", "Hana", "Ines", "Jonas",
         "Kofi", "Lena", "Mateo", "Noor", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tove")
CITIES = ("Oslo", "Lima", "Kyoto", "Accra", "Porto", "Quito", "Perth", "Turin", "Dakar", "Hanoi")
PRODUCTS = ("lamp", "kettle", "backpack", "drill", "notebook", "scarf", "tent", "speaker")
TAGS = ("new", "sale", "eco", "gift", "outdoor", "home", "travel", "classic")
EVENTS = ("concert", "marathon", "workshop", "festival", "lecture", "regatta")
GENRES = ("mystery", "poetry", "history", "science", "fantasy", "travel")
WORDS = ("silent", "golden", "northern", "hidden", "paper", "glass", "winter", "iron")

S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
STRINGS = {"type": "array", "items": {"type": "string"}}


def _schema(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _person(rng: random.Random):
    obj = {"name": rng.choice(NAMES), "age": rng.randint(18, 90), "city": rng.choice(CITIES)}
    text = (f"Describe the person {obj['name']}, who is {obj['age']} years old and lives in "
            f"{obj['city']}, as a JSON object with keys name (string), age (integer) and city (string).")
    return text, _schema({"name": S, "age": I, "city": S}), obj


def _product(rng: random.Random):
    obj = {"name": rng.choice(PRODUCTS), "price": round(rng.uniform(1, 500), 2),
           "in_stock": rng.random() < 0.5, "tags": rng.sample(TAGS, rng.randint(1, 3))}
    stock = "in stock" if obj["in_stock"] else "out of stock"
    text = (f"Give the product {obj['name']}, priced {obj['price']}, {stock}, tagged "
            f"{', '.join(obj['tags'])}, as a JSON object with keys name (string), price (number), "
            "in_stock (boolean) and tags (array of strings).")
    return text, _schema({"name": S, "price": N, "in_stock": B, "tags": STRINGS}), obj


def _event(rng: random.Random):
    obj = {"title": f"{rng.choice(WORDS)} {rng.choice(EVENTS)}", "year": rng.randint(1990, 2030),
           "attendees": rng.randint(10, 5000), "location": rng.choice(CITIES)}
    text = (f"Record the event '{obj['title']}' held in {obj['location']} in {obj['year']} with "
            f"{obj['attendees']} attendees as a JSON object with keys title (string), year (integer), "
            "attendees (integer) and location (string).")
    return text, _schema({"title": S, "year": I, "attendees": I, "location": S}), obj


def _point(rng: random.Random):
    obj = {"label": rng.choice(WORDS), "x": rng.randint(-100, 100), "y": rng.randint(-100, 100)}
    text = (f"Write the point labelled {obj['label']} at x = {obj['x']}, y = {obj['y']} as a JSON "
            "object with keys label (string), x (integer) and y (integer).")
    return text, _schema({"label": S, "x": I, "y": I}), obj


def _book(rng: random.Random):
    obj = {"title": f"The {rng.choice(WORDS).title()} {rng.choice(PRODUCTS).title()}",
           "author": rng.choice(NAMES), "pages": rng.randint(50, 900),
           "genres": rng.sample(GENRES, rng.randint(1, 2))}
    text = (f"Catalogue the book '{obj['title']}' by {obj['author']}, {obj['pages']} pages, genres "
            f"{' and '.join(obj['genres'])}, as a JSON object with keys title (string), author (string), "
            "pages (integer) and genres (array of strings).")
    return text, _schema({"title": S, "author": S, "pages": I, "genres": STRINGS}), obj


TEMPLATES: tuple[Callable[[random.Random], tuple[str, dict[str, Any], dict[str, Any]]], ...] = (
    _person, _product, _event, _point, _book)


@dataclass(frozen=True)
class JsonRow:
    prompt: str
    schema: dict[str, Any]
    answer: str

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def make_row(rng: random.Random) -> JsonRow:
    text, schema, obj = rng.choice(TEMPLATES)(rng)
    return JsonRow(prompt=text, schema=schema, answer=json.dumps(obj))


def generate(seed: int, n: int) -> list[JsonRow]:
    rng = random.Random(seed)
    return [make_row(rng) for _ in range(n)]


def grade(response: str, schema: dict[str, Any]) -> float:
    """1.0 when ``response`` is JSON that validates against ``schema``, else 0.0."""
    import jsonschema  # only grading needs it (the training machine may lack it)

    try:
        value = json.loads(response)
    except (json.JSONDecodeError, ValueError):
        return 0.0
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return 0.0
    return 1.0
