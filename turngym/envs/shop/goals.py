"""Goals the WebShop way, and the fixed splits.

A goal names a target product, some of its attributes, one value for each of its option groups
and a price bound, and says so in an instruction:

    "i am looking for a shampoo that is sulfate free and for dry hair, with size: 16 fl oz,
     and scent: lavender, and price lower than 40.00 dollars"

Price clause: the next four multiples of $10 above the target's price; two are drawn and the
larger is the bound, so the target always fits. (No multiple below $1000 -> no price clause and
no bound, as in WebShop.)

Goal ``i`` is drawn from its own RNG seeded by (catalog name, i): the same goal on every worker,
whatever the order of calls. Splits by goal index: test 0-499, eval 500-1499, train the rest.
A catalog imported with WebShop's human instructions uses those (sorted, then shuffled with a
fixed seed) instead of generated ones.
"""

from __future__ import annotations

import random
from typing import Any

from turngym.envs.shop.search import Catalog

SPLITS = {"test": (0, 500), "eval": (500, 1500)}
SPLIT_NAMES = ("train", "eval", "test")
PRICE_STEPS = [10.0 * k for k in range(1, 100)]

_TEMPLATES = [
    "i am looking for {art}{noun} that {be} {attrs}",
    "i need {art}{noun} that {be} {attrs}",
    "i want to buy {art}{noun} which {be} {attrs}",
    "find me {art}{noun} that {be} {attrs}",
    "i'm searching for {art}{noun} that {be} {attrs}",
    "can you get me {art}{noun} that {be} {attrs}",
]


def num_goals(catalog: Catalog) -> int:
    human = catalog.num_human_goals()
    if human:
        return human
    return max(3_000, min(3 * catalog.size, 50_000))


def split_range(split: str, total: int) -> range:
    if split not in SPLIT_NAMES:
        raise ValueError(f"split: {split!r} is not a split; allowed: {list(SPLIT_NAMES)}")
    if split == "train":
        return range(min(1500, total), total)
    lo, hi = SPLITS[split]
    return range(min(lo, total), min(hi, total))


def task_id(catalog: Catalog, index: int) -> str:
    return f"{catalog.name}/{index:05d}"


def parse_task_id(catalog: Catalog, tid: str) -> int:
    prefix, _, number = tid.rpartition("/")
    if prefix != catalog.name or not number.isdigit() or int(number) >= num_goals(catalog):
        raise ValueError(f"task_id: {tid!r} is not a goal of catalog {catalog.name!r} "
                         f"(expected {catalog.name}/00000 .. {catalog.name}/{num_goals(catalog) - 1:05d})")
    return int(number)


def _human_order(catalog: Catalog) -> list[int]:
    order = getattr(catalog, "_human_order", None)
    if order is None:
        order = list(range(catalog.num_human_goals()))
        if catalog.meta.get("goal_order") != "webshop":  # WebShop imports are stored in its order
            random.Random(f"turngym-shop-human-{catalog.name}").shuffle(order)
        catalog._human_order = order
    return order


def price_bound(price: float, rng: random.Random) -> float | None:
    above = [p for p in PRICE_STEPS if p > price][:4]
    if len(above) < 2:
        return None
    return max(rng.sample(above, 2))


def _noun_phrase(noun: str) -> tuple[str, str]:
    plural = noun.endswith("s") and not noun.endswith("ss")
    if plural:
        return "", "are"
    return ("an " if noun[0] in "aeiou" else "a "), "is"


def make_goal(catalog: Catalog, index: int) -> dict[str, Any]:
    """Goal ``index`` of ``catalog`` as a task row (JSON-serialisable)."""
    rng = random.Random(f"turngym-shop-goal-{catalog.name}-{index}")
    if catalog.num_human_goals():
        human = catalog.human_goal(_human_order(catalog)[index])
        product = catalog.product(human["asin"])
        base, attributes, options = human["instruction"].strip("."), human["attributes"], human["options"]
        option_text = ""
    else:
        product = catalog.product_at(rng.randrange(catalog.size))
        attributes = rng.sample(product["attributes"], min(len(product["attributes"]), rng.randint(1, 2)))
        noun = product["query"]
        art, be = _noun_phrase(noun)
        base = product.get("instruction_text") or rng.choice(_TEMPLATES).format(
            art=art, noun=noun, be=be, attrs=" and ".join(attributes))
        if product.get("instruction_attributes"):
            attributes = list(product["instruction_attributes"])
        picked = {group: rng.choice(values) for group, values in product["options"].items()}
        options = list(picked.values())
        option_text = ", with " + ", and ".join(f"{g}: {v}" for g, v in picked.items()) if picked else ""
    bound = price_bound(product["price"], rng)
    price_text = f", and price lower than {bound:.2f} dollars" if bound is not None else ""
    return {
        "task_id": task_id(catalog, index),
        "asin": product["asin"],
        "category": product.get("category", ""),
        "query": product.get("query", ""),
        "name": product["title"],
        "product_category": product.get("product_category", ""),
        "instruction_text": f"{base}{option_text}{price_text}",
        "attributes": list(attributes),
        "goal_options": list(options),
        "price_upper": bound if bound is not None else 1_000_000.0,
    }
