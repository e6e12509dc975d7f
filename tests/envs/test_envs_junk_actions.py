"""Envs: junk never raises from ``step``, an invalid action changes nothing, and a
non-string action is a TypeError naming the expected type. Every registered env is covered
(browser envs sampled: they cost a real Chromium each)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from browser_pages import browser_missing
from helpers import need_marks
from junk_actions import BROWSER_SAMPLE, JUNK, NON_STRINGS

import turngym
from turngym.core.keys import state_key

BROWSER_SAMPLED = [
    "turngym/miniwob.click-test-v0",
    "turngym/miniwob.enter-text-v0",
    "turngym/miniwob.login-user-v0",
]


def _env_ids() -> list[str]:
    ids = []
    for s in turngym.list_envs():
        if "browser" in turngym.tags(s.id).needs:
            continue
        ids.append(s.id)
    return ids + [i for i in BROWSER_SAMPLED if i in {s.id for s in turngym.list_envs()}]


ENV_IDS = _env_ids()


def _params():
    for env_id in ENV_IDS:
        marks = need_marks(env_id)
        if "browser" in turngym.tags(env_id).needs and browser_missing():
            marks.append(pytest.mark.skip(reason=browser_missing()))
        yield pytest.param(env_id, marks=marks, id=env_id)


def _battery(env, names: list[str]) -> list[str]:
    problems: list[str] = []
    obs, info = env.reset(seed=0)
    for name in names:
        before = info["state_key"]
        try:
            obs, reward, terminated, truncated, info = env.step(JUNK[name])
        except Exception as e:  # noqa: BLE001 - collecting every failure, not stopping at the first
            problems.append(f"{name}: step raised {type(e).__name__}: {str(e)[:120]}")
            obs, info = env.reset(seed=0)
            continue
        if not isinstance(obs, str):
            problems.append(f"{name}: observation is {type(obs).__name__}")
        json.dumps(info)  # still JSON-serialisable (lone surrogates escape)
        if info["scorable"] is False:
            problems.append(f"{name}: marked unscorable ({info['done_reason']})")
        # (a step that runs the turn budget out may mark the state done: that is the budget's doing)
        if not info["action_valid"] and info["state_key"] != before and not truncated:
            problems.append(f"{name}: invalid action changed state_key")
        if not info["action_valid"] and not (info["parse_error"] or obs):
            problems.append(f"{name}: invalid action without a reason")
        if terminated or truncated:
            obs, info = env.reset(seed=0)
    return problems


@pytest.mark.parametrize("env_id", list(_params()))
def test_junk_actions_never_raise_and_invalid_ones_change_nothing(env_id):
    env = turngym.make(env_id)
    names = BROWSER_SAMPLE if "browser" in turngym.tags(env_id).needs else list(JUNK)
    try:
        problems = _battery(env, names)
    finally:
        env.close()
    assert not problems, f"{len(problems)} of {len(names)} junk actions misbehaved:\n" + "\n".join(problems)


def test_the_battery_is_big_enough():
    assert len(JUNK) >= 100
    assert len(ENV_IDS) >= 20


@pytest.mark.parametrize("action", NON_STRINGS, ids=lambda a: type(a).__name__)
def test_non_string_actions_raise_a_type_error_naming_str(action):
    env = turngym.make("turngym-tests/Counter-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"expected str.*got " + type(action).__name__):
        env.step(action)
    # nothing happened: the next real action is turn 1
    _, _, _, _, info = env.step("inc")
    assert info["turn"] == 1


def test_non_string_actions_through_gymnasium_make():
    env = gym.make("turngym-tests/Counter-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="expected str"):
        env.step(None)


def test_state_key_hashes_lone_surrogates():
    assert state_key({"query": "\ud800"}) != state_key({"query": "\udc00"})
    assert state_key(["\ud800"]) == state_key(["\ud800"])


def test_parser_blowups_become_invalid_actions():
    """A _step that hits RecursionError / MemoryError / UnicodeError on odd input is an invalid
    action, not a crash (the generic guard in TurnEnv.step)."""
    from contract_env import CounterEnv

    class Fragile(CounterEnv):
        def _step(self, action):
            if action.startswith("deep"):
                raise RecursionError("maximum recursion depth exceeded")
            if action.startswith("enc"):
                action.encode()
            return super()._step(action)

    env = Fragile()
    _, info = env.reset(seed=0, options={"task_id": "counter-1"})
    for action in ("deep" + "[" * 10, "enc\ud800"):
        before = info["state_key"]
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["action_valid"] is False and "could not be read" in info["parse_error"]
        assert info["state_key"] == before and not (terminated or truncated) and reward == 0


# ----- per-defect checks from the issue ---------------------------------------------------------


def test_toolqa_unknown_tool_and_bad_arguments_leave_the_history_alone():
    env = turngym.make("turngym/ToolQA-v0")
    _, info = env.reset(seed=0)
    for action in (
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "calculator", "arguments": {"expr": "1"}}</tool_call>',
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1/0"}}</tool_call>',
        '<tool_call>{"name": "search", "arguments": {"query": "\ud800"}}</tool_call>',
    ):
        before = info["state_key"]
        _, _, _, _, info = env.step(action)
        if not info["action_valid"]:
            assert info["state_key"] == before, action
    assert env.unwrapped.history == [] or all(h[0] == "search" for h in env.unwrapped.history)


def test_auction_invalid_bid_does_not_record_the_opponents_bid():
    env = turngym.make("turngym/Auction-v0")
    _, info = env.reset(seed=0)
    before = info["state_key"]
    obs, _, _, _, info = env.step("bid[not a number]")
    assert info["action_valid"] is False and info["state_key"] == before
    assert env.unwrapped.game.bids == {}
    obs, _, _, _, info = env.step("bid[1]")
    assert info["action_valid"] is True and info["state_key"] != before


def test_negotiation_say_with_a_lone_surrogate_keeps_working():
    env = turngym.make("turngym/Negotiation-buyer-v0")
    env.reset(seed=0)
    env.step("say[\ud800]")
    _, _, _, _, info = env.step("walk away")  # later steps still work
    assert info["done_reason"] is not None


# ----- the multi-agent invalid-action rule (envs/multiagent/game.py) -------------------------------


@pytest.mark.parametrize("game", ["auction", "coop_household"])
def test_a_void_step_in_a_simultaneous_game_moves_nobody(game):
    """One agent's invalid action voids the step: the others' valid actions do not take effect,
    the state key and the game's turn stay, and everyone acts again."""
    from turngym.envs.multiagent import parallel_env

    env = parallel_env(game)
    _, infos = env.reset(seed=0)
    first, second = env.possible_agents
    before = infos[first]["state_key"]
    turn = env.game.turn
    valid = env.expert_action(second)
    _, rewards, _, _, infos = env.step({first: "junk \ud800", second: valid})
    assert infos[first]["action_valid"] is False and infos[first]["parse_error"]
    assert infos[second]["action_valid"] is True and infos[second]["extra"]["void"] is True
    assert infos[first]["state_key"] == infos[second]["state_key"] == before
    assert env.game.turn == turn and set(env.game.acting()) == {first, second}
    # the same valid actions, resent, do take effect
    _, _, _, _, infos = env.step({first: env.expert_action(first), second: valid})
    assert infos[first]["action_valid"] and infos[first]["state_key"] != before


def test_coop_single_agent_view_partner_waits_on_an_invalid_action():
    env = turngym.make("turngym/CoopHousehold-v0")
    _, info = env.reset(seed=0)
    before = info["state_key"]
    _, _, _, _, info = env.step("fly to the moon")
    assert info["action_valid"] is False and info["state_key"] == before


def test_turn_based_game_invalid_action_changes_nothing_in_the_aec_api():
    from turngym.envs.multiagent import aec_env

    env = aec_env("negotiation")
    env.reset(seed=0)
    agent = env.agent_selection
    before = env.infos[agent]["state_key"]
    env.step("accept")  # no offer to accept yet
    assert env.infos[agent]["action_valid"] is False and env.infos[agent]["state_key"] == before
    assert env.agent_selection == agent
    with pytest.raises(TypeError, match="expected str"):
        env.step(b"accept")


def test_mcp_calculator_division_by_zero_is_an_error():
    """serve-tools answers calculator("1/0") as an error (it once said is_error=False)."""
    from turngym.tools.mcp_server import EnvSession

    session = EnvSession("turngym/ToolQA-v0", seed=0)
    try:
        text, is_error, _ = session.call("calculator", {"expression": "1/0"})
        assert is_error and "division by zero" in text
        text, is_error, _ = session.call("calculator", {"expression": "6 * 7"})
        assert not is_error and text.strip() == "42"
    finally:
        session.close()


#: one env of each family (and tools mode): a step after the end raises ResetNeeded in all of them
AFTER_END_IDS = [
    "turngym/Household-v0",
    "turngym/Household-tools-v0",
    "turngym/Shop-v0",
    "turngym/ToolQA-v0",
    "turngym/CodeHumanEval-v0",
    "turngym/CodeRepair-v0",
    "turngym/Negotiation-buyer-v0",
    "turngym/Negotiation-seller-v0",
    "turngym/Auction-v0",
    "turngym/CoopHousehold-v0",
    "turngym/miniwob.click-test-v0",
]


@pytest.mark.parametrize("env_id", [p for p in _params() if p.values[0] in AFTER_END_IDS])
def test_a_step_after_the_end_raises_reset_needed_and_changes_nothing(env_id):
    from turngym.core.env import ResetNeeded

    env = turngym.make(env_id)
    try:
        env.reset(seed=0, options={"max_turns": 1})  # the first step ends the episode
        # an action the env cannot run: code envs then start no sandbox
        _, _, terminated, truncated, info = env.step("xyzzy")
        assert terminated or truncated
        state_before = state_key(env.unwrapped.state())
        for _ in range(2):  # and again: never a KeyError, never a turn 2
            with pytest.raises(ResetNeeded, match=r"call reset\(\)"):
                env.step("look")
        assert state_key(env.unwrapped.state()) == state_before
        assert env.unwrapped.turn == info["turn"] == 1
        env.reset(seed=0)  # reset starts again as usual
        _, _, _, _, info = env.step("xyzzy")
        assert info["turn"] == 1
    finally:
        env.close()


def test_reset_needed_is_gymnasiums_and_a_runtime_error_and_ends_a_finished_episode():
    from turngym.core.env import ResetNeeded

    assert issubclass(ResetNeeded, gym.error.ResetNeeded) and issubclass(ResetNeeded, RuntimeError)
    assert turngym.ResetNeeded is ResetNeeded
    env = turngym.make("turngym/Household-Easy-v0")
    env.reset(seed=0)
    terminated = False
    while not terminated:  # the expert solves the task: terminated, not truncated
        _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        assert not truncated
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.unwrapped.expert_action())
    assert env.unwrapped.turn == info["turn"]
    with pytest.raises(gym.error.ResetNeeded):  # step before reset: the same error
        turngym.make("turngym/Household-Easy-v0").unwrapped.step("look")
