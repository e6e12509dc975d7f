"""WebShop's purchase reward, computed exactly as REFERENCE.md section 2 states.

    r_price = 1 if price <= goal.price_upper else 0
    n_att   = goal attributes matched by a product attribute (rapidfuzz token-set ratio > 85)
              or found as a substring of the lower-cased title, bullet points or description
    n_opt   = goal options matched (token-set ratio > 85, after mapping colours to a base
              colour word) by one of the chosen option values
    reward  = r_type * (n_att + n_opt + r_price) / (len(goal.attributes) + len(goal.options) + 1)

r_type is 1.0, or 0.5 when the product matches neither the goal's query, nor at least 2
elements of its category path, nor at least 20% of the goal title's nouns; 0.1 when the noun
overlap is below 10%; 0.0 when it is zero.

Nouns without spaCy: ``title_nouns`` keeps the lower-cased alphabetic words of a title that are
at least 3 letters long and are not stop words, colour words, size/unit words, a curated list
of common product adjectives, nor words
with an adjective suffix (-less, -ful, -able, -ible, -ous, -ive, -proof) when longer than 5
letters. Brand names stay in, as spaCy keeps proper nouns.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz

from turngym.envs.shop import vocab

FUZZY_THRESHOLD = 85
_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    "a an and are as at be but by for from if in into is it its of on or such that the their then "
    "there these they this to was will with without your you our per all one two new set x".split())
_UNITS = frozenset(
    "oz fl ounce ounces lb lbs pound pounds inch inches feet ft cm mm ml gb tb pack count pcs piece "
    "pieces small medium large xl xxl size".split())
# A curated list: adjectives that are common in product titles (spaCy would tag them ADJ).
_ADJECTIVES = frozenset(
    "best high low long short big small soft hard light dark free easy quick fast slow hot cold warm "
    "cool great good nice pure fresh extra super mini natural organic wireless waterproof portable "
    "adjustable durable lightweight premium professional compact reusable electric digital smart "
    "classic modern vintage casual slim loose thick thin wide full double single heavy duty deluxe "
    "everyday ultra upgraded curly dry oily sensitive fine raw vegan kosher gentle clean safe strong "
    "sturdy solid daily new old large medium tall mens womens kids unisex".split())
_ADJ_SUFFIXES = ("less", "ful", "able", "ible", "ous", "ive", "proof")
_COLOR_WORDS = frozenset(vocab.BASE_COLORS)


def title_nouns(title: str) -> set[str]:
    """The noun heuristic used by r_type (see the module docstring)."""
    out = set()
    for w in _WORD.findall(title.lower()):
        if len(w) < 3 or w in _STOP or w in _UNITS or w in _ADJECTIVES or w in _COLOR_WORDS:
            continue
        if len(w) > 5 and w.endswith(_ADJ_SUFFIXES):
            continue
        out.add(w)
    return out


def normalize_color(value: str) -> str:
    """Map an option value that names a colour onto its base colour word ("navy blue" -> "navy")."""
    low = value.lower()
    for base in vocab.BASE_COLORS:
        if re.search(rf"\b{base}\b", low):
            return base
    return low


def _category_elements(path: str) -> set[str]:
    return {e.strip().lower() for e in re.split(r"›|>|\|", path) if e.strip()}


def type_reward(product: dict[str, Any], goal: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    query_match = bool(goal.get("query")) and product.get("query", "").lower() == goal["query"].lower()
    shared = _category_elements(product.get("product_category", "")) & _category_elements(
        goal.get("product_category", ""))
    category_match = len(shared) >= 2
    goal_nouns = title_nouns(goal.get("name", ""))
    bought_nouns = title_nouns(product.get("title", ""))
    title_score = len(goal_nouns & bought_nouns) / len(goal_nouns) if goal_nouns else 1.0
    r_type = 1.0
    if not query_match and not category_match and title_score < 0.2:
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, {"query_match": query_match, "category_match": category_match,
                    "title_score": title_score}


def attribute_matches(product: dict[str, Any], goal_attributes: list[str]) -> int:
    text = " ".join([product.get("title", ""), *product.get("bullet_points", []),
                     product.get("description", "")]).lower()
    n = 0
    for g in goal_attributes:
        if any(fuzz.token_set_ratio(p, g) > FUZZY_THRESHOLD for p in product.get("attributes", [])) \
                or g.lower() in text:
            n += 1
    return n


def option_matches(chosen: list[str], goal_options: list[str]) -> int:
    chosen_n = [normalize_color(o) for o in chosen]
    n = 0
    for g in goal_options:
        g_n = normalize_color(g)
        if any(fuzz.token_set_ratio(c, g_n) > FUZZY_THRESHOLD for c in chosen_n):
            n += 1
    return n


def purchase_reward(product: dict[str, Any], chosen_options: dict[str, str] | list[str],
                    goal: dict[str, Any]) -> tuple[float, dict[str, float], dict[str, Any]]:
    """Score buying ``product`` with ``chosen_options`` against ``goal``.

    Returns ``(reward, components, details)``. ``components`` sums to the reward:
    ``attributes`` = r_type * w * n_att, ``options`` = r_type * w * n_opt,
    ``price`` = r_type * w * r_price with w = 1 / (len(attributes) + len(options) + 1).
    ``details`` holds r_att, r_option (fractions, None when the goal has none), r_price, r_type,
    the weights and the r_type evidence.
    """
    chosen = list(chosen_options.values()) if isinstance(chosen_options, dict) else list(chosen_options)
    goal_attrs = list(goal.get("attributes", []))
    goal_opts = list(goal.get("goal_options", []))
    r_price = 1.0 if product["price"] <= goal["price_upper"] else 0.0
    n_att = attribute_matches(product, goal_attrs)
    n_opt = option_matches(chosen, goal_opts)
    r_type, type_info = type_reward(product, goal)
    total = len(goal_attrs) + len(goal_opts) + 1
    w = 1.0 / total
    reward = r_type * (n_att + n_opt + r_price) / total
    components = {"attributes": r_type * w * n_att, "options": r_type * w * n_opt, "price": r_type * w * r_price}
    details = {
        "r_att": n_att / len(goal_attrs) if goal_attrs else None,
        "r_option": n_opt / len(goal_opts) if goal_opts else None,
        "r_price": r_price, "r_type": r_type,
        "w_att": len(goal_attrs) * w, "w_option": len(goal_opts) * w, "w_price": w,
        **type_info,
    }
    return reward, components, details
