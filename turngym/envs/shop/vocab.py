"""Vocabularies for the generated catalog: departments, product types, attributes, options.

Each department has a category-path root and a few subcategories; each subcategory lists its
product nouns (the search query a product was "found under"), attribute phrases (what goals ask
for: "sulfate free", "water resistant"), "for ..." phrases, and the option groups it offers.
The words themselves are data, in vocab.json beside this file, read once at import.
"""

from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads((Path(__file__).with_name("vocab.json")).read_text(encoding="utf-8"))

# WebShop's colour list (web_agent_site/engine/normalize.py, COLOR_SET; MIT licence,
# Copyright (c) 2023 Princeton Natural Language Processing). The reward maps an option value onto
# the FIRST entry that occurs in it as a plain substring, in this order ("dark gray" -> "dark").
WEBSHOP_COLORS: list[str] = _DATA["webshop_colors"]
# the colour names of the generated catalog
COLORS: list[str] = _DATA["colors"]
# option kind -> its values ("apparel_size" -> ["x-small", ...])
OPTION_VALUES: dict[str, list[str]] = _DATA["option_values"]
# three lists of syllables a brand name is made of, one from each
BRAND_PARTS: tuple[list[str], ...] = tuple(_DATA["brand_parts"])
GENERIC_ADJECTIVES: list[str] = _DATA["generic_adjectives"]
# department -> (category-path root, {subcategory: spec})
# spec: nouns, attributes (goal-able phrases), uses ("for ..." phrases), options (group -> kind)
DEPARTMENTS: dict[str, tuple[str, dict[str, dict]]] = {
    department: (root, subcategories) for department, (root, subcategories) in _DATA["departments"].items()
}
REVIEW_TITLES: list[str] = _DATA["review_titles"]
REVIEW_BODIES: list[str] = _DATA["review_bodies"]  # str.format templates: {noun}, {attribute}
