"""Playing one episode for a check (with invalid actions slipped in when asked) and replaying it
from the same seed to find the first difference."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turngym.check.policies import INVALID_ACTIONS, Factory

DEFAULT_MAX_TURNS = 200  # for envs registered without a turn limit


@dataclass
class Episode:
    task_id: str
    seed: int
    actions: list[str] = field(default_factory=list)
    # per turn (reset included): observation, reward, terminated, truncated, state_key, action_valid
    trace: list[tuple] = field(default_factory=list)
    episode_return: float = 0.0
    success: bool = False
    scorable: bool = True
    error: str | None = None
    done_reason: str | None = None
    invalid_steps: int = 0
    invalid_changes: list[str] = field(default_factory=list)  # what an invalid action changed


def _snapshot(observation: str, reward: float, terminated: bool, truncated: bool, info: dict) -> tuple:
    return (
        observation,
        round(float(reward), 9),
        terminated,
        truncated,
        info.get("state_key"),
        info.get("action_valid"),
    )


def _note_invalid(episode: Episode, action: str, before: dict, after: dict) -> None:
    """An action the env called invalid must change nothing: state key, admissible actions, progress."""
    episode.invalid_steps += 1
    changed = [k for k in ("state_key", "admissible_actions", "progress") if before.get(k) != after.get(k)]
    if changed:
        episode.invalid_changes.append(
            f"{episode.task_id} turn {len(episode.actions)}: {action[:40]!r} changed {', '.join(changed)}"
        )


def play(env, factory: Factory, task_id: str, seed: int, probes: int = 0) -> Episode | None:
    """One episode of a policy; None when the policy does not apply to it. With ``probes``, the
    first turns alternate an action from ``INVALID_ACTIONS`` with the policy's own action."""
    observation, info = env.reset(seed=seed, options={"task_id": task_id})
    act = factory(env, seed, observation, info)
    if act is None:
        return None
    episode = Episode(task_id=task_id, seed=seed)
    episode.trace.append(_snapshot(observation, 0.0, False, False, info))
    limit = (env.spec.max_episode_steps if env.spec is not None else None) or DEFAULT_MAX_TURNS
    for turn in range(limit + probes):
        if turn % 2 == 0 and turn // 2 < probes:
            action = INVALID_ACTIONS[(turn // 2 + seed) % len(INVALID_ACTIONS)]  # each kind in turn
        else:
            try:
                action = act(observation, info)
            except NotImplementedError:
                raise
            except Exception as exc:  # the policy could not read the env's observation: report it
                episode.error = f"the policy failed: {type(exc).__name__}: {exc}"
                return episode
        try:
            observation, reward, terminated, truncated, new_info = env.step(action)
        except Exception as exc:  # step must never raise, whatever the action
            episode.error = f"step({action[:40]!r}) raised {type(exc).__name__}: {exc}"
            return episode
        episode.actions.append(action)
        episode.trace.append(_snapshot(observation, reward, terminated, truncated, new_info))
        episode.episode_return += reward
        # an invalid action on the last turn may end the episode (turn limit, on_error="end"),
        # which changes the state legitimately: only turns that go on are compared
        if new_info.get("action_valid") is False and not (terminated or truncated):
            _note_invalid(episode, action, info, new_info)
        info = new_info
        if not info.get("scorable", True):
            episode.scorable = False
        if terminated or truncated:
            episode.success = bool(info.get("is_success"))
            episode.done_reason = info.get("done_reason")
            return episode
    episode.error = f"no end after {len(episode.actions)} steps (the env set no turn limit?)"
    return episode


def replay(env, episode: Episode) -> str | None:
    """Play ``episode``'s actions again from the same seed and task; the first difference, or None."""
    observation, info = env.reset(seed=episode.seed, options={"task_id": episode.task_id})
    trace = [_snapshot(observation, 0.0, False, False, info)]
    for action in episode.actions:
        observation, reward, terminated, truncated, info = env.step(action)
        trace.append(_snapshot(observation, reward, terminated, truncated, info))
    names = ("observation", "reward", "terminated", "truncated", "state_key", "action_valid")
    for turn, (a, b) in enumerate(zip(episode.trace, trace)):
        for name, x, y in zip(names, a, b):
            if x != y:
                return f"{episode.task_id} seed {episode.seed} turn {turn}: {name} differs ({_short(x)} vs {_short(y)})"
    if len(trace) != len(episode.trace):
        return f"{episode.task_id} seed {episode.seed}: {len(episode.trace)} vs {len(trace)} turns"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
