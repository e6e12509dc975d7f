"""WebShop's purchase reward on hand-built products and goals; every expected value is worked out
by hand in the comment above it."""

from __future__ import annotations

import pytest

from turngym.envs.shop.reward import normalize_color, purchase_reward, title_nouns

SHAMPOO = {
    "asin": "B0TARGET01", "title": "Lumora Sulfate Free Argan Oil Shampoo for Curly Hair",
    "query": "shampoo", "product_category": "Beauty & Personal Care › Hair Care › Shampoo", "price": 18.5,
    "options": {"size": ["8 fl oz", "16 fl oz"], "scent": ["lavender", "coconut"]},
    "attributes": ["sulfate free", "argan oil", "color safe"],
    "bullet_points": ["Gentle cleansing for curly hair.", "Paraben free formula."],
    "description": "A sulfate free shampoo with argan oil.",
}
# goal nouns: {lumora, sulfate, argan, oil, shampoo, hair}; 2 attributes + 2 options + price = 5 parts
GOAL = {
    "asin": "B0TARGET01", "name": SHAMPOO["title"], "query": "shampoo",
    "product_category": SHAMPOO["product_category"], "attributes": ["sulfate free", "paraben free"],
    "goal_options": ["16 fl oz", "lavender"], "price_upper": 20.0,
}
CONDITIONER = {
    "asin": "B0OTHER002", "title": "Lumora Argan Oil Conditioner for Curly Hair", "query": "conditioner",
    "product_category": "Beauty & Personal Care › Hair Care › Conditioner", "price": 15.0,
    "options": {"size": ["16 fl oz"]}, "attributes": ["argan oil"],
    "bullet_points": ["Softens curls."], "description": "Leave for two minutes, rinse.",
}
EARBUDS = {
    "asin": "B0OTHER003", "title": "Norvo Wireless Earbuds with Noise Cancelling", "query": "wireless earbuds",
    "product_category": "Electronics › Headphones › Wireless Earbuds", "price": 15.0,
    "options": {"color": ["black"]}, "attributes": ["noise cancelling"],
    "bullet_points": ["Bluetooth 5.0."], "description": "Twelve hours of music.",
}
MIRROR = {
    "asin": "B0OTHER004", "title": "Lumora Travel Makeup Mirror", "query": "makeup mirror",
    "product_category": "Beauty & Personal Care › Tools & Accessories › Makeup Mirror", "price": 12.0,
    "options": {"color": ["rose gold"]}, "attributes": ["led light"],
    "bullet_points": ["Folds flat."], "description": "Bright and small.",
}


def _with(product: dict, **changes) -> dict:
    return {**product, **changes}


def _reward(product, options, goal=GOAL):
    reward, components, details = purchase_reward(product, options, goal)
    assert sum(components.values()) == pytest.approx(reward)
    return reward, details


def test_exact_target_scores_one():
    # attributes: "sulfate free" fuzzy-matches an attribute; "paraben free" is a substring of a
    # bullet point -> 2/2; options 2/2; price 18.5 <= 20 -> 1; (2 + 2 + 1) / 5 = 1.0
    reward, d = _reward(SHAMPOO, {"size": "16 fl oz", "scent": "lavender"})
    assert reward == pytest.approx(1.0)
    assert d["r_att"] == 1.0 and d["r_option"] == 1.0 and d["r_price"] == 1.0 and d["r_type"] == 1.0


def test_wrong_size_loses_one_part():
    # "8 fl oz" vs "16 fl oz": token-set ratio 83.3 <= 85, no match -> (2 + 1 + 1) / 5 = 0.8
    reward, d = _reward(SHAMPOO, {"size": "8 fl oz", "scent": "lavender"})
    assert reward == pytest.approx(0.8)
    assert d["r_option"] == 0.5


def test_wrong_scent_loses_one_part():
    # (2 + 1 + 1) / 5 = 0.8
    assert _reward(SHAMPOO, {"size": "16 fl oz", "scent": "coconut"})[0] == pytest.approx(0.8)


def test_no_options_chosen():
    # (2 + 0 + 1) / 5 = 0.6
    assert _reward(SHAMPOO, {})[0] == pytest.approx(0.6)


def test_over_budget_loses_price():
    # same product at $25 > $20: (2 + 2 + 0) / 5 = 0.8
    reward, d = _reward(_with(SHAMPOO, price=25.0), {"size": "16 fl oz", "scent": "lavender"})
    assert reward == pytest.approx(0.8) and d["r_price"] == 0.0


def test_price_equal_to_bound_counts():
    # price == price_upper satisfies "<=": 1.0
    assert _reward(_with(SHAMPOO, price=20.0), ["16 fl oz", "lavender"])[0] == pytest.approx(1.0)


def test_same_category_other_product():
    # conditioner: query differs, but 2 category elements are shared -> r_type 1.0 (nouns 4/6 anyway);
    # attributes 0/2 (neither phrase appears), options 1/2 (16 fl oz), price 15 <= 20:
    # (0 + 1 + 1) / 5 = 0.4
    reward, d = _reward(CONDITIONER, {"size": "16 fl oz"})
    assert reward == pytest.approx(0.4)
    assert d["r_type"] == 1.0 and d["category_match"] and not d["query_match"]
    assert d["title_score"] == pytest.approx(4 / 6)


def test_wrong_category_scores_zero():
    # earbuds share no noun with the shampoo title -> r_type 0.0 -> reward 0 despite the price
    reward, d = _reward(EARBUDS, {"color": "black"})
    assert reward == 0.0 and d["r_type"] == 0.0 and d["title_score"] == 0.0


def test_weak_type_match_halves():
    # mirror: query and category (1 shared element) differ; nouns 1/6 = 0.167 in [0.1, 0.2)
    # -> r_type 0.5; only the price part holds: 0.5 * (0 + 0 + 1) / 5 = 0.1
    reward, d = _reward(MIRROR, {"color": "rose gold"})
    assert reward == pytest.approx(0.1) and d["r_type"] == 0.5


def test_tiny_noun_overlap_gives_point_one():
    # 13 goal nouns, 1 shared ("velora") -> 1/13 < 0.1 -> r_type 0.1; goal has 1 attribute, no
    # options: price holds, attribute not -> 0.1 * (0 + 1) / 2 = 0.05
    goal = {"name": "Velora Bamboo Cutting Board Set with Juice Groove Handle Storage Rack Kitchen Counter Tray Gift",
            "query": "cutting board", "product_category": "Home & Kitchen › Kitchen & Dining › Cutting Board",
            "attributes": ["bpa free"], "goal_options": [], "price_upper": 30.0}
    mat = {"title": "Velora Yoga Mat", "query": "yoga mat", "price": 20.0,
           "product_category": "Sports & Outdoors › Exercise & Fitness › Yoga Mat", "options": {},
           "attributes": ["non slip"], "bullet_points": [], "description": ""}
    reward, d = _reward(mat, {}, goal)
    assert d["r_type"] == 0.1 and reward == pytest.approx(0.05)
    assert d["r_option"] is None and d["w_price"] == pytest.approx(0.5)


def test_colors_are_normalised():
    # goal "light blue" vs chosen "sky blue": raw ratio 66.7 fails, both map to "blue" -> match
    goal = {**GOAL, "goal_options": ["light blue"]}
    shirt = _with(SHAMPOO, options={"color": ["sky blue", "red"]})
    # (2 + 1 + 1) / 4 = 1.0
    assert _reward(shirt, {"color": "sky blue"}, goal)[0] == pytest.approx(1.0)
    # (2 + 0 + 1) / 4 = 0.75
    assert _reward(shirt, {"color": "red"}, goal)[0] == pytest.approx(0.75)


def test_fuzzy_attribute_match():
    # "free sulfate" (100, token sets equal) and "argan oils" (94.7 vs "argan oil") match product
    # attributes though neither is a substring of the text: (2 + 2 + 1) / 5 = 1.0
    goal = {**GOAL, "attributes": ["free sulfate", "argan oils"]}
    assert _reward(SHAMPOO, {"size": "16 fl oz", "scent": "lavender"}, goal)[0] == pytest.approx(1.0)


def test_components_hold_weights():
    _, components, details = purchase_reward(SHAMPOO, {"size": "8 fl oz"}, GOAL)
    # attributes 2/5, options 0/5, price 1/5
    assert components == pytest.approx({"attributes": 0.4, "options": 0.0, "price": 0.2})
    assert details["w_att"] == pytest.approx(0.4) and details["w_option"] == pytest.approx(0.4)


def test_helpers():
    assert normalize_color("Navy Blue") == "navy"
    assert normalize_color("royal blue") == "blue"
    assert normalize_color("16 fl oz") == "16 fl oz"
    assert title_nouns("Lumora Sulfate Free Argan Oil Shampoo for Curly Hair") == {
        "lumora", "sulfate", "argan", "oil", "shampoo", "hair"}
