"""Random walks that check env snapshots: walk to a random turn, snapshot, continue, restore, replay.

``check_walk`` is the property test of one walk (tests/envs/test_snapshots*.py run it over many
seeds): from a seeded reset it takes random actions (admissible ones, the expert's, the family's
own commands and junk) to a random turn t, snapshots, continues with actions A and records every
observation, reward, flag and info; then it restores the snapshot in the same env and in a fresh
env made from the same id (from a pickled and unpickled copy) and checks that A gives the same
record in both, that the snapshot is unchanged, and that restoring one env left the other alone.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
from junk_actions import JUNK

from turngym.core.keys import state_key

#: junk small enough to send hundreds of times a test
SMALL_JUNK = [v for v in JUNK.values() if len(v) <= 2_000]


#: the share of actions asked of the expert (where one is slow, a test may lower it)
EXPERT_SHARE = 0.15


def choose_action(
    rng: np.random.Generator,
    env: Any,
    info: dict[str, Any],
    own: list[str],
    expert_share: float = EXPERT_SHARE,
) -> str:
    """An admissible action, the expert's, one of the family's own commands, or junk."""
    r = rng.random()
    admissible = info.get("admissible_actions")
    if r < 0.5:  # an env with no admissible list gets its own commands instead
        if admissible:
            return admissible[int(rng.integers(len(admissible)))]
    elif r < 0.5 + expert_share:
        try:
            return env.expert_action()
        except Exception:  # noqa: BLE001 - an env without an expert, or none from this state
            pass
    pool = own if r < 0.9 and own else SMALL_JUNK
    return pool[int(rng.integers(len(pool)))]


def _continue(
    env: Any,
    seed: int,
    steps: int,
    own: list[str],
    last_info: dict[str, Any],
    done: bool = False,
    expert_share: float = EXPERT_SHARE,
    then_reset: bool = True,
) -> list[tuple]:
    """``steps`` actions from the env's state now, chosen by an RNG seeded with ``seed`` (so a
    replay from an equal state chooses the same ones); the record of each turn."""
    rng = np.random.default_rng(seed)
    record, info = [], last_info
    for _ in range(steps):
        if done:
            break
        action = choose_action(rng, env, info, own, expert_share)
        obs, reward, terminated, truncated, info = env.step(action)
        record.append((action, obs, reward, terminated, truncated, info))
        done = terminated or truncated
    if then_reset:  # an unseeded reset draws its task and episode seed from the env's RNG: state too
        record.append(env.reset())
    return record


def check_walk(
    make: Callable[[], Any],
    env: Any,
    walk: int,
    own: list[str],
    max_prefix: int = 12,
    max_continuation: int = 6,
    expert_share: float = EXPERT_SHARE,
) -> dict[str, int]:
    """One walk on ``env`` (made by ``make``); assertion errors name the walk. Returns sizes."""
    rng = np.random.default_rng(walk)
    obs, info = env.reset(seed=walk)
    t = int(rng.integers(0, max_prefix + 1))
    prefix = _continue(env, walk * 7919 + 1, t, own, info, expert_share=expert_share, then_reset=False)
    done = False
    if prefix:  # it may have ended the episode: then the continuations are empty
        _, obs, _, terminated, truncated, info = prefix[-1]
        done = terminated or truncated
    snap = env.snapshot()
    frozen = bytes(snap.state)
    steps = int(rng.integers(1, max_continuation + 1))
    seed = walk * 7919 + 2
    original = _continue(env, seed, steps, own, info, done, expert_share)
    after_original = state_key(env.state()), env.turn

    # the same env, restored
    restored_obs, restored_info = env.restore(snap)
    assert (restored_obs, restored_info) == (obs, info), f"walk {walk}: restore's observation or info differ"
    replay = _continue(env, seed, steps, own, info, done, expert_share)
    assert replay == original, f"walk {walk}: same env, turn {t}: the replay differs"

    # a fresh env from the same id, restored from a pickled copy
    copy = pickle.loads(pickle.dumps(snap))
    assert copy == snap, f"walk {walk}: the snapshot does not survive pickling"
    other = make()
    try:
        other.restore(copy)
        fresh = _continue(other, seed, steps, own, info, done, expert_share)
        assert fresh == original, f"walk {walk}: fresh env, turn {t}: the replay differs"
        # restoring and stepping the other env left this one alone
        assert (state_key(env.state()), env.turn) == after_original, (
            f"walk {walk}: restoring another env changed this one"
        )
    finally:
        other.close()
    assert snap.state == frozen, f"walk {walk}: restoring changed the snapshot"
    return {"turn": t, "steps": len(original) - 1, "bytes": snap.nbytes}


def _continue_pettingzoo(
    env: Any,
    seed: int,
    steps: int,
    own: list[str],
    infos: dict[str, Any],
    expert_share: float = EXPERT_SHARE,
    then_reset: bool = True,
) -> list[tuple]:
    """As ``_continue`` for a PettingZoo env: Parallel (every live agent acts) or AEC (the
    selected one does); the record holds every agent's observation, reward, flags and info."""
    rng = np.random.default_rng(seed)
    record = []
    for _ in range(steps):
        if not env.agents:
            break
        if hasattr(env, "agent_selection"):  # AEC
            agent = env.agent_selection
            obs, reward, terminated, truncated, info = env.last()
            action = None if terminated or truncated else _seat_action(rng, env, agent, info, own, expert_share)
            env.step(action)
            record.append(
                (
                    agent,
                    action,
                    {a: env.observe(a) for a in env.possible_agents},
                    dict(env.rewards),
                    dict(env.terminations),
                    dict(env.truncations),
                    dict(env.infos),
                )
            )
        else:
            actions = {a: _seat_action(rng, env, a, infos.get(a, {}), own, expert_share) for a in env.agents}
            obs, rewards, terminations, truncations, infos = env.step(actions)
            record.append((actions, obs, rewards, terminations, truncations, infos))
    if then_reset:  # the env's RNG draws the next task and episode seed
        record.append(env.reset())
    return record


def _seat_action(
    rng: np.random.Generator, env: Any, agent: str, info: dict[str, Any], own: list[str], expert_share: float
) -> str:
    class Seat:  # choose_action asks an env for its expert; here the seat's
        def expert_action(self):
            return env.expert_action(agent)

    return choose_action(rng, Seat(), info, own, expert_share)


def check_pettingzoo_walk(
    make: Callable[[], Any],
    env: Any,
    walk: int,
    own: list[str],
    max_prefix: int = 10,
    max_continuation: int = 6,
    expert_share: float = EXPERT_SHARE,
) -> dict[str, int]:
    """``check_walk`` for a PettingZoo Parallel or AEC env."""
    rng = np.random.default_rng(walk)
    reset = env.reset(seed=walk)
    infos = reset[1] if reset is not None else {}
    t = int(rng.integers(0, max_prefix + 1))
    prefix = _continue_pettingzoo(env, walk * 7919 + 1, t, own, infos, expert_share, then_reset=False)
    if prefix and not hasattr(env, "agent_selection"):
        infos = prefix[-1][5]
    snap = env.snapshot()
    frozen = bytes(snap.state)
    steps = int(rng.integers(1, max_continuation + 1))
    seed = walk * 7919 + 2
    original = _continue_pettingzoo(env, seed, steps, own, infos, expert_share)
    after_original = env.state()
    env.restore(snap)
    assert _continue_pettingzoo(env, seed, steps, own, infos, expert_share) == original, (
        f"walk {walk}: same env: the replay differs"
    )
    copy = pickle.loads(pickle.dumps(snap))
    assert copy == snap, f"walk {walk}: the snapshot does not survive pickling"
    other = make()
    other.restore(copy)
    assert _continue_pettingzoo(other, seed, steps, own, infos, expert_share) == original, (
        f"walk {walk}: fresh env: the replay differs"
    )
    assert env.state() == after_original, f"walk {walk}: restoring another env changed this one"
    assert snap.state == frozen, f"walk {walk}: restoring changed the snapshot"
    return {"turn": t, "steps": len(original) - 1, "bytes": snap.nbytes}
