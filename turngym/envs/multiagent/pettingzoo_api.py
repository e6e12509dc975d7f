"""PettingZoo Parallel and AEC envs over a ``TextGame``, both native (no conversion wrappers).

``env.game`` is the game's engine; ``env.task_sets`` holds each seat's ``SeatTask``, which briefs
the seat at reset and scores every step (``game.play``).

Spaces are ``UnicodeText`` (any string). ``infos[agent]`` is the agent's StepInfo, with the same
keys as every single-agent turngym env (``state_key`` included). In the Parallel API every live
agent sends an action each step and only the agents the game waits for (``game.acting()``) have
an effect; the others are told they are waiting. In the AEC API only those agents are selected.

Both take snapshots (``metadata["snapshots"]``): ``snapshot()`` holds the game, the seats' tasks,
the RNGs and, for AEC, the pending actions and the per-agent dicts; ``restore(snapshot)`` returns
nothing (read ``observe``/``last`` for AEC; a Parallel env's observations are the ones it returned
when the snapshot was taken).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from pettingzoo import AECEnv, ParallelEnv

from turngym.core.keys import episode_id, state_key
from turngym.core.snapshot import Snapshot, check_origin, dump_state, load_state
from turngym.core.spaces import UnicodeText
from turngym.envs.multiagent.game import SeatTask, TextGame, agent_info, play


class TextObservation(str):
    """A ``str`` that also carries ``dtype`` (None, as UnicodeText's), because PettingZoo's
    ``api_test`` compares ``observation.dtype`` with the space's dtype."""

    dtype = None


def _choose_task(
    tasks: SeatTask, rng: np.random.Generator, options: dict[str, Any] | None, default_split: str
) -> dict[str, Any]:
    options = dict(options or {})
    unknown = set(options) - {"task_id", "split", "task"}
    if unknown:
        warnings.warn(f"reset options: ignoring unknown keys {sorted(unknown)}", stacklevel=3)
    if "task" in options:
        return dict(options["task"])
    if "task_id" in options:
        return tasks.get_task(str(options["task_id"]))
    ids = tasks.task_ids(options.get("split", default_split))
    return tasks.get_task(ids[int(rng.integers(len(ids)))])


class _GameEnvMixin:
    """What both APIs share: the game and its seats' tasks, task choice, seeding, spaces, per-agent
    info."""

    metadata = {"render_modes": ["ansi"], "is_parallelizable": True, "snapshots": True}

    def _init_game(self, game: TextGame, split: str, render_mode: str | None) -> None:
        from turngym.envs.multiagent import TASKS

        self.game = game
        self.task_sets: dict[str, SeatTask] = {a: TASKS[game.name](a) for a in game.possible_agents}
        self.split = split
        self.render_mode = render_mode
        self.possible_agents = list(game.possible_agents)
        # one space object per agent, returned every time, as PettingZoo's tests ask
        self._spaces = {a: UnicodeText() for a in self.possible_agents}
        self._np_random = np.random.default_rng()
        self.episode_id = ""
        self.last_text: dict[str, str] = {}

    def observation_space(self, agent: str) -> UnicodeText:
        return self._spaces[agent]

    def action_space(self, agent: str) -> UnicodeText:
        return self._spaces[agent]

    def expert_action(self, agent: str) -> str:
        return self.task_sets[agent].expert_action(self.game, self.game.task)

    def scripted_action(self, agent: str) -> str:
        """The default move of ``agent`` when no learner plays it (the auction's is not the expert's)."""
        return self.task_sets[agent].scripted_action(self.game, self.game.task)

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, str]:
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
            for i, a in enumerate(self.possible_agents):
                self._spaces[a].seed(seed + i)
        episode_seed = int(self._np_random.integers(0, 2**31 - 1))
        # every seat's task holds the game's rows: the first seat's chooses
        task = _choose_task(self.task_sets[self.possible_agents[0]], self._np_random, options, self.split)
        self.episode_id = episode_id(self.game.name, task["task_id"], episode_seed)
        self.game.reset(task, episode_seed)
        obs = {a: self.task_sets[a].setup(self.game, task) for a in self.possible_agents}
        self.last_text = dict(obs)
        return obs

    def _reset_info(self, agent: str, obs: str) -> dict[str, Any]:
        instructions = self.game.instructions(agent)
        messages = ([{"role": "system", "content": instructions}] if instructions else []) + [
            {"role": "user", "content": obs}
        ]
        return agent_info(self.game, agent, self.episode_id, {"messages": messages})

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(f"[{a}] {t}" for a, t in self.last_text.items())
        return None

    def close(self) -> None:
        pass

    def snapshot(self) -> Snapshot:
        """Everything that decides the game's future, as an opaque, immutable, picklable value."""
        return Snapshot(self._snapshot_name(), self.game.turn, dump_state(dict(vars(self)), {}))

    def restore(self, snapshot: Snapshot) -> None:
        """Go back to ``snapshot`` (from this env or another over the same game); it never changes."""
        check_origin(snapshot, self._snapshot_name())
        state = load_state(snapshot.state, {})
        for name in [k for k in vars(self) if k not in state]:
            delattr(self, name)
        vars(self).update(state)

    def _snapshot_name(self) -> str:
        return f"multiagent/{self.game.name}/{type(self).__name__}"

    def state(self) -> str:
        return state_key(self.game.state())


class ParallelTextEnv(_GameEnvMixin, ParallelEnv):
    def __init__(self, game: TextGame, split: str = "train", render_mode: str | None = None):
        self._init_game(game, split, render_mode)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        obs = self._start(seed, options)
        self.agents = list(self.possible_agents)
        return obs, {a: self._reset_info(a, obs[a]) for a in self.agents}

    def step(self, actions: dict[str, str]):
        acting = self.game.acting()
        for a in acting:
            if a in actions and not isinstance(actions[a], str):
                raise TypeError(f"actions[{a!r}]: expected str, got {type(actions[a]).__name__}")
        outcomes = play(self.game, self.task_sets, {a: actions[a] for a in acting if a in actions})
        done = self.game.over
        truncated = done and self.game.done_reason == "max_turns"
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        key = state_key(self.game.state())
        for a in self.agents:
            outcome = outcomes.get(a)
            text = outcome.observation if outcome else "Waiting for the other players."
            fields = dict(outcome.info) if outcome else {}
            fields.setdefault("messages", [{"role": "user", "content": text}])
            reward = outcome.reward if outcome else 0.0
            obs[a], rewards[a] = text, float(reward)
            terms[a], truncs[a] = done and not truncated, truncated
            infos[a] = agent_info(self.game, a, self.episode_id, fields, reward, key)
            self.last_text[a] = text
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


class AECTextEnv(_GameEnvMixin, AECEnv):
    def __init__(self, game: TextGame, split: str = "train", render_mode: str | None = None):
        self._init_game(game, split, render_mode)
        self.agents = []
        self.rewards, self._cumulative_rewards = {}, {}
        self.terminations, self.truncations, self.infos = {}, {}, {}
        self.agent_selection = None
        self._pending: dict[str, str] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        obs = self._start(seed, options)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: self._reset_info(a, obs[a]) for a in self.agents}
        self._pending = {}
        self.agent_selection = self._next_agent()

    def observe(self, agent: str) -> str:
        return TextObservation(self.last_text.get(agent, ""))

    def _next_agent(self) -> str:
        waiting = [a for a in self.game.acting() if a not in self._pending]
        return waiting[0] if waiting else self.agents[0]

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if not isinstance(action, str):  # None is only for agents that are done (above)
            raise TypeError(f"action of {agent!r}: expected str, got {type(action).__name__}")
        self._pending[agent] = action
        if any(a not in self._pending for a in self.game.acting()):
            self.agent_selection = self._next_agent()  # simultaneous move: others still to act
            self._accumulate_rewards()
            return
        outcomes = play(self.game, self.task_sets, self._pending)
        self._pending = {}
        done = self.game.over
        truncated = done and self.game.done_reason == "max_turns"
        key = state_key(self.game.state())
        for a in self.agents:
            outcome = outcomes.get(a)
            if outcome is None:
                continue
            fields = dict(outcome.info)
            fields.setdefault("messages", [{"role": "user", "content": outcome.observation}])
            self.rewards[a] = float(outcome.reward)
            self.infos[a] = agent_info(self.game, a, self.episode_id, fields, outcome.reward, key)
            self.last_text[a] = outcome.observation
            self.terminations[a] = done and not truncated
            self.truncations[a] = truncated
        self._accumulate_rewards()
        if done:
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = self._next_agent()
