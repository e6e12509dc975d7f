"""Env snapshots: the property test per family (random walks, see tests/support/snapshot_walks.py) and the API's edges.

Each family gets at least 1,000 walks, spread over its ids (the multi-agent family: 600 on the
seat envs, 420 on the PettingZoo Parallel and AEC envs); a few per id run in the fast subset, the
rest under the ``slow`` marker (``pytest -m ""`` runs them all). After ``restore(snapshot at turn t)``,
in the same env and in a fresh one from the same id, the same actions give the same observations,
rewards, flags and infos (``state_key`` included). The code envs, whose steps run the sandbox,
are in test_snapshots_code.py.
"""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from snapshot_walks import check_pettingzoo_walk, check_walk

import turngym
from turngym.core.env import TurnEnv
from turngym.core.snapshot import Snapshot, SnapshotUnsupported

HOUSEHOLD_IDS = [s.id for s in turngym.list_envs() if turngym.tags(s.id).family == "household"]
HOUSEHOLD_OWN = [
    "look",
    "inventory",
    "help",
    "go to fridge 1",
    "go to countertop 1",
    "open fridge 1",
    "close fridge 1",
    "take apple 1 from fridge 1",
    "move mug 1 to sinkbasin 1",
    "heat potato 1 with microwave 1",
    "examine drawer 1",
    "go to nowhere 7",
    "put mug 1 in/on countertop 1",
    "use desklamp 1",
    "slice bread 1 with knife 1",
]
SHOP_IDS = [
    "turngym/Shop-v0",
    "turngym/Shop-100-v0",
    "turngym/Shop-HTML-v0",
    "turngym/Shop-TextRich-v0",
    "turngym/Shop-Text-v0",
    "turngym/Shop-tools-v0",
    "turngym/Shop-HTML-tools-v0",
]
SHOP_OWN = [
    "search[shampoo]",
    "search[red running shoes size 9]",
    "search[]",
    "search[tea]",
    "click[back to search]",
    "click[next >]",
    "click[< prev]",
    "click[buy now]",
    "click[description]",
    "click[features]",
    "click[reviews]",
    "click[no such button]",
]
TOOLQA_IDS = [s.id for s in turngym.list_envs() if turngym.tags(s.id).family == "toolqa"]


def _call(name: str, **arguments) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


# no python tool here: each call starts an interpreter (its history entry is state like any other)
# one answer (it ends the episode) among many calls, so that most walks go on past the snapshot
TOOLQA_OWN = [
    _call("calculator", expression="2 * 21"),
    _call("calculator", expression="1/0"),
    _call("calculator", expression="(3 + 4) * 12.5"),
    _call("search", query="population of Alderbrook"),
    _call("search", query="river"),
    _call("search", query="founded"),
    _call("answer", answer="42"),
    _call("nope", x=1),
    _call("calculator", expr="1"),
    _call("calculator", expression="2 ** 10"),
    _call("calculator", expression="7") + _call("search", query="mayor"),
    "no call at all",
    _call("search", query=""),
]
SEAT_OWN = [
    "accept",
    "walk away",
    "say[hello]",
    "offer[apple for 10]",
    "offer[book for 35]",
    "bid[0]",
    "bid[5]",
    "bid[37]",
    "bid[1000]",
    "pass",
    "look",
    "go to fridge 1",
    "inventory",
    "take mug 1 from countertop 1",
]
# (id, extra make() arguments): the seat envs with their scripted partners, and with random ones
# (whose RNGs then decide the other seats' moves)
SEAT_ENVS = [(s.id, {}) for s in turngym.list_envs() if turngym.tags(s.id).family == "multiagent"] + [
    ("turngym/Negotiation-buyer-v0", {"others": "random"}),
    ("turngym/Auction-v0", {"others": "random"}),
]


def _walks(make, walks: range, own: list[str], **options) -> list[dict]:
    env = make()
    try:
        sizes = [check_walk(make, env, w, own, **options) for w in walks]
    finally:
        env.close()
    # most walks must go on past their snapshot (an episode that ended before it checks little)
    assert sum(s["steps"] > 0 for s in sizes) >= len(sizes) / 3, sizes
    return sizes


def _parts(ids: list, total: int, fast: int) -> list:
    """Each id's walks: the first ``fast`` in the fast subset, the rest (to ``total`` over the
    family) under the slow marker, so that ``pytest -m ""`` walks the whole family."""
    per_id = -(-total // len(ids))
    return [pytest.param(i, range(0, fast), id=f"{i}-fast") for i in ids] + [
        pytest.param(i, range(fast, per_id), marks=pytest.mark.slow, id=f"{i}-rest") for i in ids
    ]


@pytest.mark.parametrize("env_id,walks", _parts(HOUSEHOLD_IDS, 1000, 12))
def test_household_walks(env_id, walks):
    sizes = _walks(lambda: turngym.make(env_id), walks, HOUSEHOLD_OWN)
    assert any(s["turn"] > 5 for s in sizes) and min(s["bytes"] for s in sizes) > 0


@pytest.mark.parametrize("env_id,walks", _parts(SHOP_IDS, 1000, 15))
def test_shop_walks(env_id, walks):
    sizes = _walks(lambda: turngym.make(env_id), walks, SHOP_OWN)
    assert any(s["turn"] > 5 for s in sizes)


@pytest.mark.parametrize("env_id,walks", _parts(TOOLQA_IDS, 1000, 6))
def test_toolqa_walks(env_id, walks):
    # a tool call costs ~0.1 s, and the expert of the data questions runs the python tool (an
    # interpreter a call): shorter walks, the expert asked less
    _walks(lambda: turngym.make(env_id), walks, TOOLQA_OWN, expert_share=0.02, max_prefix=5, max_continuation=4)


@pytest.mark.parametrize("seat,walks", _parts(SEAT_ENVS, 600, 10), ids=str)
def test_multiagent_seat_walks(seat, walks):
    env_id, kwargs = seat
    # the auction's expert plans by search (~10 ms a call): asked less; a negotiation often ends
    # within a few turns (an accept, a walk-away): short prefixes
    _walks(lambda: turngym.make(env_id, **kwargs), walks, SEAT_OWN, expert_share=0.03, max_prefix=4)


@pytest.mark.parametrize(
    "game_api,walks",
    _parts(
        [(g, a) for g in ("negotiation", "auction", "coop_household") for a in ("parallel_env", "aec_env")],
        420,
        10,
    ),
    ids=str,
)
def test_multiagent_pettingzoo_walks(game_api, walks):
    from turngym.envs import multiagent

    game, api = game_api

    def make():
        return getattr(multiagent, api)(game)

    env = make()
    for walk in walks:
        check_pettingzoo_walk(make, env, walk, SEAT_OWN, expert_share=0.03)


# ----- the API's edges --------------------------------------------------------------------------
def test_snapshot_is_frozen_and_picklable():
    env = turngym.make("turngym/Household-v0")
    env.reset(seed=3)
    snap = env.snapshot()
    assert isinstance(snap, Snapshot) and snap.env == "turngym/Household-v0" and snap.turn == 0
    with pytest.raises(AttributeError):
        snap.turn = 5
    assert pickle.loads(pickle.dumps(snap)) == snap


def test_restore_undoes_a_reset_and_a_new_task():
    env = turngym.make("turngym/Household-v0")
    first = env.reset(seed=1)
    snap = env.snapshot()
    env.reset(seed=2)
    env.step("look")
    assert env.restore(snap) == first
    assert env.turn == 0 and env.task["task_id"] == first[1]["task_id"]
    fresh = turngym.make("turngym/Household-v0")
    fresh.reset(seed=1)
    assert env.step("look") == fresh.step("look")


def test_reset_with_a_snapshot_works_through_gymnasium_wrappers():
    env = turngym.make("turngym/Shop-v0")
    env.reset(seed=4)
    env.step("search[shampoo]")
    snap = env.snapshot()
    expected = env.step("click[next >]")
    wrapped = gym.make("turngym/Shop-v0")  # OrderEnforcing, PassiveEnvChecker: no snapshot() on them
    obs, info = wrapped.reset(options={"snapshot": snap})
    assert info["turn"] == 1 and obs == env.restore(snap)[0]
    assert wrapped.step("click[next >]") == expected
    with pytest.raises(ValueError, match="'snapshot' goes alone"):
        wrapped.reset(seed=1, options={"snapshot": snap})


def test_a_snapshot_goes_only_into_an_env_of_the_same_id():
    env = turngym.make("turngym/Household-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="taken from 'turngym/Household-v0'.*turngym/Household-Easy-v0"):
        turngym.make("turngym/Household-Easy-v0").restore(env.snapshot())
    with pytest.raises(ValueError, match="expected a Snapshot"):
        env.restore(b"not a snapshot")
    with pytest.raises(ValueError, match="expected a Snapshot.*got dict"):  # as JSON over HTTP would send it
        env.reset(options={"snapshot": {"env": "turngym/Household-v0"}})


class _PlainEnv(TurnEnv):
    """An env that declares no snapshots (as the browser envs)."""

    def task_ids(self, split=None):
        return ["only"]

    def get_task(self, task_id):
        return {"task_id": task_id}

    def _reset(self, task):
        return "hello", {}


def test_an_env_without_the_capability_says_so_by_name():
    env = _PlainEnv()
    env.reset(seed=0)
    with pytest.raises(SnapshotUnsupported, match="_PlainEnv does not support snapshot"):
        env.snapshot()
    with pytest.raises(SnapshotUnsupported):
        env.restore(Snapshot("x", 0, b""))
    with pytest.raises(ValueError, match="reset options: snapshot: .*_PlainEnv does not support"):
        env.reset(options={"snapshot": Snapshot("x", 0, b"")})


def test_the_capability_is_declared_per_id():
    assert turngym.snapshots_supported("turngym/Household-tools-v0")
    assert turngym.snapshots_supported("turngym/CodeRepair-v0")
    assert not turngym.snapshots_supported("turngym/ShopPages-v0")
    assert not turngym.snapshots_supported("turngym/miniwob.click-test-v0")
    for s in turngym.list_envs():  # a tools-mode env follows its base
        if turngym.tags(s.id).family in ("household", "shop", "toolqa", "multiagent", "code"):
            assert turngym.snapshots_supported(s.id), s.id


def test_a_snapshot_shares_the_catalog_rather_than_copying_it():
    env = turngym.make("turngym/Shop-v0")
    env.reset(seed=0)
    assert env.snapshot().nbytes < 50_000  # the 1k catalog alone pickles to megabytes


class _Talker:
    """A Policy for another seat: always says hello (RandomPolicy's words are no valid move here,
    and a seat that never moves validly loops SingleAgentView's step, as it does without snapshots)."""

    def act(self, conversations):
        return ["say[hello]" for _ in conversations]


def test_a_policy_playing_another_seat_is_shared_not_copied():
    policy, other_policy = _Talker(), _Talker()
    env = turngym.make("turngym/Negotiation-buyer-v0", others=policy)
    env.reset(seed=1)
    snap = env.snapshot()
    env.restore(snap)
    assert all(p.spec is policy for p in env.players.values())
    other = turngym.make("turngym/Negotiation-buyer-v0", others=other_policy)
    other.restore(pickle.loads(pickle.dumps(snap)))
    assert all(p.spec is other_policy for p in other.players.values())  # the restoring env's own
    assert other.step("say[hello]") == env.step("say[hello]")  # equal policies, equal RNG states
