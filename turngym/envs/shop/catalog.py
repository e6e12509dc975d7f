"""Product catalogs: a seeded generator of WebShop-shaped records and a loader for WebShop's JSON.

A product is a plain dict:

    asin            "B0" + 8 characters, unique in the catalog
    title           "Velora Sulfate Free Shampoo for Curly Hair, 16 Fl Oz"
    category        department key ("beauty", "electronics", "fashion", "grocery", "home", ...)
    product_category  category path joined by " › " ("Beauty & Personal Care › Hair Care › Shampoo")
    query           the search query the product was listed under ("shampoo")
    price           float, dollars
    options         {"size": ["8 fl oz", ...], "scent": [...]} (group -> values; may be empty)
    attributes      ["sulfate free", "for dry hair", ...]
    bullet_points   list of strings
    description     string
    rating          float in [1, 5]
    reviews         [{"score": int, "title": str, "body": str}, ...]

``generate_catalog(size, seed)`` builds one in memory (100k products in a few seconds);
``load_webshop_json(items, attributes=None, human_instructions=None)`` reads the original
WebShop files (``items_shuffle*.json``, ``items_ins_v2*.json``, ``items_human_ins.json``).
Persisting and searching them is ``turngym.envs.shop.search``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from turngym.envs.shop import vocab

CATALOG_SIZES = {"100": 100, "1k": 1_000, "10k": 10_000, "100k": 100_000}
_ASIN_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASIN_SPACE = 36**8
_ASIN_STRIDE = 2_654_435_761  # coprime with 36, so i -> i * stride mod 36^8 is one-to-one


def catalog_size(size: int | str) -> int:
    """Accept 100, 1000, "1k", "10k", "100k"... and return the number of products."""
    if isinstance(size, str):
        if size.lower() in CATALOG_SIZES:
            return CATALOG_SIZES[size.lower()]
        if not size.isdigit():
            raise ValueError(f"catalog_size: {size!r} is not a size; allowed: {list(CATALOG_SIZES)} or an integer")
        size = int(size)
    if not isinstance(size, int) or size < 10:
        raise ValueError(f"catalog_size: {size!r} must be an integer >= 10 (or one of {list(CATALOG_SIZES)})")
    return size


def make_asin(index: int, seed: int) -> str:
    n = (index * _ASIN_STRIDE + seed * 7919 + 12345) % _ASIN_SPACE
    chars = []
    for _ in range(8):
        n, r = divmod(n, 36)
        chars.append(_ASIN_ALPHABET[r])
    return "B0" + "".join(reversed(chars))


def _subcategories() -> list[tuple[str, str, str, dict]]:
    out = []
    for dept, (root, subs) in vocab.DEPARTMENTS.items():
        for sub, spec in subs.items():
            out.append((dept, root, sub, spec))
    return out


_SUBCATS = _subcategories()
_PRICE_BANDS = {"beauty": (6, 60), "electronics": (9, 180), "fashion": (9, 90), "grocery": (3, 45),
                "home": (12, 400), "sports": (8, 160), "pets": (6, 120)}


def _brand(rng: random.Random) -> str:
    a, b, c = vocab.BRAND_PARTS
    return (rng.choice(a) + rng.choice(b) + rng.choice(c)).capitalize()


def _title_case(text: str) -> str:
    return " ".join(w if any(ch.isdigit() for ch in w) else w[:1].upper() + w[1:] for w in text.split())


def generate_product(index: int, rng: random.Random, seed: int = 0) -> dict[str, Any]:
    dept, root, sub, spec = _SUBCATS[rng.randrange(len(_SUBCATS))]
    noun = rng.choice(spec["nouns"])
    attributes = rng.sample(spec["attributes"], rng.randint(2, 4))
    use = rng.choice(spec["uses"])
    brand = _brand(rng)
    adjective = rng.choice(vocab.GENERIC_ADJECTIVES)
    options: dict[str, list[str]] = {}
    for group, kind in spec["options"].items():
        values = vocab.COLORS if kind == "color" else vocab.OPTION_VALUES[kind]
        if rng.random() < 0.85:  # some products come in one variant only
            k = min(len(values), rng.randint(2, 6))
            start = rng.randrange(len(values))
            picked = [values[(start + j) % len(values)] for j in range(k)] if kind != "color" \
                else rng.sample(values, k)
            options[group] = picked
    title_attrs = [a for a in attributes[:2] if not a.startswith("for ")]
    spec_text = ""
    if "size" in options and rng.random() < 0.4:
        spec_text = ", " + options["size"][0]
    title = _title_case(f"{brand} {adjective} {' '.join(title_attrs)} {noun} for {use}") + spec_text
    lo, hi = _PRICE_BANDS[dept]
    price = round(lo + (hi - lo) * rng.random() ** 2, 2)
    bullets = [
        f"{attributes[0].capitalize()}: this {noun} is made to last, {rng.choice(['tested', 'designed', 'built'])} "
        f"for {use}.",
        f"{attributes[1].capitalize()} and {adjective}, so it fits {use} without fuss.",
        f"What you get: one {noun} from {brand}, with a 30-day return window.",
    ]
    for extra in attributes[2:]:
        bullets.insert(2, f"{extra.capitalize()} for everyday peace of mind.")
    description = (f"The {brand} {noun} is a {adjective} choice for {use}. It is {', '.join(attributes[:-1])} "
                   f"and {attributes[-1]}. Part of our {sub.lower()} line.")
    reviews = []
    for _ in range(rng.randint(1, 3)):
        score = rng.choice([3, 4, 4, 5, 5, 5, 2])
        reviews.append({"score": score, "title": rng.choice(vocab.REVIEW_TITLES),
                        "body": rng.choice(vocab.REVIEW_BODIES).format(noun=noun, attribute=attributes[0])})
    return {
        "asin": make_asin(index, seed),
        "title": title,
        "category": dept,
        "product_category": f"{root} › {sub} › {_title_case(noun)}",
        "query": noun,
        "price": price,
        "options": options,
        "attributes": attributes,
        "bullet_points": bullets,
        "description": description,
        "rating": round(sum(r["score"] for r in reviews) / len(reviews), 1),
        "reviews": reviews,
    }


def generate_catalog(size: int | str, seed: int = 0) -> list[dict[str, Any]]:
    """``size`` products, identical for the same (size, seed) on every machine."""
    n = catalog_size(size)
    rng = random.Random(f"turngym-shop-catalog-{seed}")
    return [generate_product(i, rng, seed) for i in range(n)]


# ----- WebShop's own files --------------------------------------------------------------------

def _read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _price(pricing: Any) -> float | None:
    """WebShop pricing is a list of one or two prices (a range) or a "$1.00 - $2.00" string."""
    if isinstance(pricing, (int, float)):
        return float(pricing)
    if isinstance(pricing, str):
        nums = [p.strip().lstrip("$").replace(",", "") for p in pricing.split("-")]
        pricing = [float(p) for p in nums if p.replace(".", "", 1).isdigit()]
    if isinstance(pricing, list) and pricing:
        return float(min(pricing))
    return None


def load_webshop_json(items: str | Path, attributes: str | Path | None = None,
                      human_instructions: str | Path | None = None) -> tuple[list[dict], list[dict]]:
    """Convert WebShop's product file (and optional attribute / human-goal files) to turngym shape.

    Returns ``(products, human_goals)``; each human goal is a dict with ``asin``,
    ``instruction`` (no price clause yet), ``attributes`` and ``options`` (chosen values).
    Products without a price are dropped, as WebShop does.
    """
    raw = _read_json(items)
    attrs = _read_json(attributes) if attributes else {}
    products = []
    for item in raw:
        asin = item.get("asin")
        price = _price(item.get("pricing"))
        if not asin or price is None:
            continue
        options = {}
        for group, values in (item.get("customization_options") or {}).items():
            vals = [str(v["value"] if isinstance(v, dict) else v).strip() for v in values or []]
            if vals:
                options[group.lower()] = vals
        bullets = item.get("small_description") or []
        if isinstance(bullets, str):
            bullets = [bullets]
        description = item.get("full_description") or ""
        if isinstance(description, list):
            description = " ".join(description)
        extra = attrs.get(asin, {})
        product = {
            "asin": asin.upper(),
            "title": (item.get("name") or item.get("title") or "").strip(),
            "category": item.get("category", ""),
            "product_category": item.get("product_category", ""),
            "query": (item.get("query") or "").lower().strip(),
            "price": price,
            "options": options,
            "attributes": list(extra.get("attributes", item.get("attributes", []))),
            "bullet_points": [str(b) for b in bullets],
            "description": str(description),
            "rating": float(item.get("average_rating") or 0.0) if str(item.get("average_rating", ""))
            .replace(".", "", 1).isdigit() else 0.0,
            "reviews": [{"score": int(r.get("score", 0) or 0), "title": r.get("title", ""),
                         "body": r.get("body", "")} for r in item.get("Reviews", item.get("reviews", [])) or []],
        }
        if extra.get("instruction"):  # items_ins_v2's synthetic instruction, used for generated goals
            product["instruction_text"] = str(extra["instruction"]).strip().rstrip(".")
            product["instruction_attributes"] = list(extra.get("instruction_attributes", []))
        products.append(product)
    goals: list[dict] = []
    if human_instructions:
        known = {p["asin"] for p in products}
        for asin, rows in _read_json(human_instructions).items():
            if asin.upper() not in known:
                continue
            for row in rows:
                goals.append({"asin": asin.upper(), "instruction": row["instruction"].strip(),
                              "attributes": list(row.get("instruction_attributes", [])),
                              "options": [str(o) for o in row.get("instruction_options", [])]})
    # file order must not decide splits: sort, and goals.py shuffles with a fixed seed
    goals.sort(key=lambda g: (g["asin"], g["instruction"], g["attributes"], g["options"]))
    return products, goals
