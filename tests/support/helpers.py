"""Shared test helpers: which envs the registry-wide tests cover, and when to skip one."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

import turngym

# Families with many near-identical ids test a sample of them in the registry-wide tests;
# each family's own tests cover the rest.
SAMPLED_FAMILIES: dict[str, int] = {"miniwob": 4}
# Ids left out of the registry-wide tests, with the reason; their family's own tests cover them.
EXCLUDED_IDS: dict[str, str] = {
    "turngym/Shop-100k-v0": "builds a 100k-product catalog (too slow for the suite); "
    "tests/envs/test_shop.py checks its spec, benchmarks/shop_throughput.py runs it",
}


def contract_env_ids() -> list[str]:
    ids, seen = [], {}
    for s in turngym.list_envs():
        if s.id in EXCLUDED_IDS:
            continue
        family = turngym.tags(s.id).family
        limit = SAMPLED_FAMILIES.get(family)
        seen[family] = seen.get(family, 0) + 1
        if limit is None or seen[family] <= limit:
            ids.append(s.id)
    return ids


#: the test markers of what an env needs (spec.needs), so `-m "not browser"` leaves its cases out
NEED_MARKS = {"browser": pytest.mark.browser, "sandbox": pytest.mark.sandbox}


def need_marks(env_id: str) -> list:
    return [NEED_MARKS[n] for n in turngym.tags(env_id).needs if n in NEED_MARKS]


def env_params(env_ids: list[str]) -> list:
    """The ids as pytest params, each carrying the markers of what its env needs."""
    return [pytest.param(i, id=i, marks=need_marks(i)) for i in env_ids]


def missing_requirement(env_id: str) -> str | None:
    """Why this machine cannot run the env, or None."""
    needs = turngym.tags(env_id).needs
    if "browser" in needs:
        if importlib.util.find_spec("playwright") is None:
            return "playwright is not installed"
        if not (shutil.which("chromium-headless-shell") or shutil.which("chromium")):
            return "no Chromium (apt-get install chromium-headless-shell)"
    if "model" in needs and importlib.util.find_spec("transformers") is None:
        return "transformers is not installed"
    return None


def make_or_skip(env_id: str, **kwargs):
    reason = missing_requirement(env_id)
    if reason:
        pytest.skip(f"{env_id}: {reason}")
    return turngym.make(env_id, **kwargs)
