"""One seat of a multi-agent game as a Gymnasium env, and rollouts with several learners.

``SingleAgentView`` plays every other seat with a given policy ("expert", "random", or any
``Policy``), so the single-agent trainers and EnvPool train one seat unchanged.
``multiagent_rollout`` plays a game with one policy per seat and returns one Trajectory per
seat per episode, so each learning agent gets its own trajectories and its own credit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from turngym.core.env import TurnEnv, state_key
from turngym.core.policy import Conversation, as_completion
from turngym.core.records import Step, Trajectory, group_id
from turngym.core.versions import code_hash
from turngym.envs.multiagent.game import SeatTask, TextGame
from turngym.envs.multiagent.pettingzoo_api import ParallelTextEnv

RANDOM_ACTIONS = {
    "negotiation": ["accept", "walk away", "say[hello]", "offer[{item} for {price}]"],
    "auction": ["bid[{price}]"],
}


#: void rounds in a row (every move invalid, nothing changed) the other seats may play while this
#: seat waits; then the episode ends unscorable (done_reason "seat_stuck"): a seat policy that
#: never makes a valid move would otherwise keep this seat waiting forever
MAX_VOID_ROUNDS = 20


def game_class(name: str) -> type[TextGame]:
    from turngym.envs.multiagent import GAMES

    if name not in GAMES:
        raise ValueError(f"game: {name!r} is not one of {sorted(GAMES)}")
    return GAMES[name]


class _SeatPlayer:
    """Chooses the actions of a seat the learner does not control."""

    def __init__(self, spec: Any, task: SeatTask, game: TextGame, seed: int):
        if isinstance(spec, str) and spec not in ("scripted", "expert", "random"):
            raise ValueError(f"others: {spec!r} must be 'scripted', 'expert', 'random' or a Policy object")
        self.spec, self.task, self.agent, self.game = spec, task, task.seat, game
        self.rng = np.random.default_rng(seed)
        self.messages: list[dict] = []
        self.info: dict[str, Any] = {}

    def observe(self, info: dict[str, Any]) -> None:
        self.messages.extend(info.get("messages", []))
        self.info = info

    def act(self) -> str:
        if self.spec == "scripted":
            return self.task.scripted_action(self.game, self.game.task)
        if self.spec == "expert":
            return self.task.expert_action(self.game, self.game.task)
        if self.spec == "random":
            admissible = self.game.admissible_actions(self.agent)
            if admissible:
                return admissible[int(self.rng.integers(len(admissible)))]
            options = RANDOM_ACTIONS.get(self.game.name, ["noop"])
            template = options[int(self.rng.integers(len(options)))]
            items = self.game.task.get("items") or ["item"]
            return template.format(item=items[int(self.rng.integers(len(items)))], price=int(self.rng.integers(0, 60)))
        completion = as_completion(self.spec.act([Conversation(messages=self.messages, info=self.info)])[0])
        self.messages.append({"role": "assistant", "content": completion.action})
        return completion.action


class SingleAgentView(TurnEnv):
    """Seat ``seat`` of game ``game``; the other seats are played by ``others``. ``env.task_set`` is
    the seat's ``SeatTask``, the one its ``ParallelTextEnv`` scores the seat's steps with.

    A snapshot holds the game, the seats' tasks and the other seats' players (their RNGs and
    conversations); a ``Policy`` among ``others`` is shared, not copied (its own sampling is
    its own)."""

    metadata = {**TurnEnv.metadata, "snapshots": True}

    def __init__(
        self,
        game: str = "negotiation",
        seat: str | None = None,
        others: Any = "scripted",
        game_kwargs: dict[str, Any] | None = None,
        **kwargs,
    ):
        self.game = game_class(game)(**(game_kwargs or {}))
        self.default_split = "train"
        super().__init__(**kwargs)
        self.seat = seat or self.game.possible_agents[0]
        if self.seat not in self.game.possible_agents:
            raise ValueError(f"seat: {self.seat!r} is not one of {list(self.game.possible_agents)}")
        self.others_spec = others
        self.parallel = ParallelTextEnv(self.game, split=self.split)
        self.task_set = self.parallel.task_sets[self.seat]
        self.players: dict[str, _SeatPlayer] = {}
        self.ended_before_turn: tuple[float, dict] | None = None

    def instructions(self) -> str:
        return self.game.instructions(self.seat)

    def _shared_objects(self) -> dict[str, Any]:
        others = self.others_spec.items() if isinstance(self.others_spec, dict) else [("*", self.others_spec)]
        policies = {f"others {seat}": spec for seat, spec in others if not isinstance(spec, str)}
        return {**super()._shared_objects(), **policies}

    def state(self):
        return self.game.state()

    def admissible_actions(self):
        return None if self.game.over else self.game.admissible_actions(self.seat)

    def expert_action(self) -> str:
        return self.task_set.expert_action(self.game, self.task)

    def _reset(self, task):
        _, infos = self.parallel.reset(seed=self.episode_seed, options={"task": task})
        self.players = {}
        for i, agent in enumerate(a for a in self.game.possible_agents if a != self.seat):
            spec = self.others_spec.get(agent, "scripted") if isinstance(self.others_spec, dict) else self.others_spec
            self.players[agent] = _SeatPlayer(
                spec, self.parallel.task_sets[agent], self.game, self.episode_seed + i + 1
            )
            self.players[agent].observe(infos[agent])
        texts, reward, fields = self._advance([self.task_set.setup(self.game, task)], 0.0, {})
        # the other seats may end the game before this seat's first turn (a buyer walking away);
        # reset cannot say so, so the first step reports the end and pays what the seat got
        self.ended_before_turn = (reward, fields) if self.game.over else None
        return "\n".join(texts), {}

    def _step(self, action):
        if self.infra_failure is not None:  # another seat got stuck before this seat's first turn
            return self._stuck_end("", 0.0, {"action_valid": False, "parse_error": "the game stopped before your turn"})
        if self.ended_before_turn is not None:
            reward, fields = self.ended_before_turn
            self.ended_before_turn = None
            fields = {
                **fields,
                "action_valid": False,
                "parse_error": "the game ended before your turn; the action was not played",
            }
            texts = ["The game is over: it ended before your turn, so your action was not played."]
        else:
            actions = {a: self.players[a].act() for a in self.game.acting() if a != self.seat}
            actions[self.seat] = action
            texts, reward, fields = self._advance([], 0.0, {}, actions)
            if self.infra_failure is not None:
                return self._stuck_end("\n".join(texts), reward, fields)
        done = self.game.over
        truncated = done and self.game.done_reason == "max_turns"
        return "\n".join(texts), reward, done and not truncated, truncated, fields

    def _stuck_end(self, text: str, reward: float, fields: dict):
        """End the episode a stuck seat stopped (unscorable: the seat's policy failed, not this one)."""
        reason, error = self.infra_failure
        message = f"The game stopped: {error}. This episode cannot be scored."
        fields = {
            **fields,
            "done_reason": reason,
            "reward_components": {"reward": reward},
            "messages": [{"role": "user", "content": message}],
        }
        return (f"{text}\n{message}" if text else message), reward, False, True, fields

    def _advance(self, texts: list[str], reward: float, fields: dict, actions: dict | None = None):
        """Step the game until the seat must act again or the game ends (or the other seats play
        MAX_VOID_ROUNDS void rounds in a row, which fails the episode: see ``fail_infra``)."""
        void_rounds = 0
        while actions is not None or (not self.game.over and self.seat not in self.game.acting()):
            others_only = actions is None
            if others_only:
                actions = {a: self.players[a].act() for a in self.game.acting()}
            before = state_key(self.game.state())
            obs, rewards, _, _, infos = self.parallel.step(actions)
            void_rounds = void_rounds + 1 if others_only and state_key(self.game.state()) == before else 0
            if void_rounds >= MAX_VOID_ROUNDS:
                stuck = ", ".join(sorted(actions))
                self.fail_infra("seat_stuck", f"{stuck} made no valid move in {MAX_VOID_ROUNDS} tries")
                break
            actions = None
            texts.append(obs[self.seat])
            reward += rewards[self.seat]
            seat_info = infos[self.seat]
            if not fields:  # validity of the seat's own action is decided by the first step
                fields = {k: seat_info[k] for k in ("action_valid", "parse_error")}
            for k in ("is_success", "progress", "done_reason"):
                fields[k] = seat_info[k]
            fields["extra"] = seat_info["extra"]
            for agent, player in self.players.items():
                player.observe(infos[agent])
            if self.game.over:
                break
        if fields:
            fields["reward_components"] = {"reward": reward}
        return texts, reward, fields


def multiagent_rollout(
    game: str,
    policies: dict[str, Any],
    tasks: list[str],
    group_size: int = 1,
    seed: int = 0,
    max_turns: int = 200,
) -> dict[str, list[Trajectory]]:
    """Play ``game`` with one policy per seat; one Trajectory per seat per episode.

    A seat's policy is a ``Policy`` or "scripted"/"expert"/"random". Each seat's Steps hold only its own
    turns (its observation, its action, the rewards it received), so credit is per agent:
    feed ``result[agent]`` to any advantage estimator.
    """
    cls = game_class(game)
    version = code_hash([cls.__module__], {"game": game})
    out: dict[str, list[Trajectory]] = {a: [] for a in cls.possible_agents}
    for i, task_id in enumerate(tasks):
        for member in range(group_size):
            g = cls()
            env = ParallelTextEnv(g)
            obs, infos = env.reset(seed=seed + i, options={"task_id": task_id})
            group = group_id(task_id, seed + i)
            players = {
                a: _SeatPlayer(policies.get(a, "scripted"), env.task_sets[a], g, seed + i + k)
                for k, a in enumerate(g.possible_agents)
            }
            trajs = {
                a: Trajectory(
                    env_id=f"multiagent/{game}",
                    task_id=task_id,
                    seed=seed + i,
                    group_id=f"{group}/{a}",
                    trajectory_id=f"{group}/{a}#{member}",
                    initial_observation=obs[a],
                    initial_info=infos[a],
                    metadata={"agent": a},
                    env_hash=version,
                )
                for a in g.possible_agents
            }
            last = {a: (obs[a], infos[a]) for a in g.possible_agents}
            for a, p in players.items():
                p.observe(infos[a])
            steps = 0
            while not g.over and steps < max_turns:
                acting = g.acting()
                actions = {a: players[a].act() for a in acting}
                obs, rewards, terms, truncs, infos = env.step(actions)
                steps += 1
                for a in g.possible_agents:
                    players[a].observe(infos[a])
                    if a in actions:
                        trajs[a].steps.append(
                            Step(
                                turn=len(trajs[a].steps),
                                observation=last[a][0],
                                action=actions[a],
                                reward=rewards[a],
                                terminated=terms[a],
                                truncated=truncs[a],
                                state_key=last[a][1]["state_key"],
                                info=infos[a],
                            )
                        )
                    elif trajs[a].steps:  # rewards that arrive while waiting still count
                        trajs[a].steps[-1].reward += rewards[a]
                    last[a] = (obs[a], infos[a])
            for a, t in trajs.items():
                t.episode_return = sum(s.reward for s in t.steps)
                t.success = bool(last[a][1]["is_success"])
                out[a].append(t)
    return out
