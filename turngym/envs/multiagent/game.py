"""The engine interface behind every multi-agent env, and the task side of its seats.

A game has two halves, kept apart as in every family (core/task.py). Its engine, a ``TextGame``,
is the runtime: turn order, state, parsing moves, observations. The PettingZoo Parallel and
AEC envs (``pettingzoo_api.py``) and ``SingleAgentView`` (``single_agent.py``) all drive one
through the same few methods:

    reset(task, seed)                      start ``task`` (a row of the game's Task)
    acting() -> [agent, ...]               whose actions the next ``step`` needs (one agent in
                                           turn-based games, several in simultaneous ones)
    step({agent: action}) -> {agent: Outcome}   one outcome per agent (acting or not)
    state()                                canonical true state (hashed into ``state_key``)
    over, done_reason, turn                whether and why the game ended; the game's turn count
    instructions(agent), admissible_actions(agent)

Its task side is a ``SeatTask`` per seat, the ``Task`` (core/task.py) of that seat with the
engine as its world: the game's task rows, what the seat is told at the start (``setup``), its
score (``validate``), the oracle's move (``expert_action``) and the default move of a seat
nobody else plays (``scripted_action``). ``TASKS`` (``__init__.py``) names each game's. The envs
read every reward through ``validate``: ``play`` steps the engine and scores what it returns.

The invalid-action rule (every game, every API): a step in which any acting agent's action is
malformed or impossible (in seat order: in the state the earlier seats' actions of that step
lead to) is void. No action of that step takes
effect, so the state (the game's turn count included) and ``state_key`` are unchanged. Each
agent whose action was invalid gets an observation saying why (``action_valid=False``); each
other acting agent is told its action did not take effect (``action_valid=True``,
``extra["void"]=True``). All of them act again. In turn-based games only the mover acts, so
this is the single-agent rule. ``void_step`` builds those outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from turngym.core.env import StepInfo
from turngym.core.keys import state_key
from turngym.core.task import Validation


@dataclass
class Outcome:
    """What a step did for one agent. ``play`` fills in the rest from the seat's ``validate``:
    ``progress`` always (unless the engine set it), and for a ``scored`` outcome the whole
    verdict (reward, success, components, extra; its ``message`` ends the observation)."""

    observation: str
    info: dict[str, Any] = field(default_factory=dict)  # StepInfo fields for this agent
    scored: bool = False
    reward: float = 0.0


class TextGame:
    """A game's engine: its runtime alone (see the module docstring); its seats' ``SeatTask``
    brief, score and play them."""

    possible_agents: tuple[str, ...] = ()
    name = "game"
    max_turns = 50

    def __init__(self) -> None:
        self.task: dict[str, Any] = {}
        self.rng = np.random.default_rng(0)
        self.turn = 0
        self.over = False
        self.done_reason: str | None = None

    def reset(self, task: dict[str, Any], seed: int) -> None:
        """Start ``task``; each seat's ``SeatTask.setup`` then says what that seat is told."""
        raise NotImplementedError

    def acting(self) -> list[str]:
        raise NotImplementedError

    def step(self, actions: dict[str, str]) -> dict[str, Outcome]:
        raise NotImplementedError

    def state(self) -> Any:
        raise NotImplementedError

    def instructions(self, agent: str) -> str:
        return ""

    def admissible_actions(self, agent: str) -> list[str] | None:
        return None


class SeatTask:
    """The ``Task`` (core/task.py) of one seat of a game. Its world is the game's engine (a
    ``TextGame``), which the env resets with the episode's seed before ``setup``.

    This base class holds generated task rows: ``splits`` says how many per split, ``generate``
    makes a row from an rng seeded by its id, ``name`` (the game's) spells the ids."""

    name = "game"
    splits = {"train": 2000, "test": 200}

    def __init__(self, seat: str):
        self.seat = seat

    def task_ids(self, split: str) -> list[str]:
        if split not in self.splits:
            raise ValueError(f"split: {split!r} is not one of {sorted(self.splits)}")
        return [f"{self.name}-{split}-{i}" for i in range(self.splits[split])]

    def get_task(self, task_id: str) -> dict[str, Any]:
        prefix, _, index = task_id.rpartition("-")
        split = prefix.removeprefix(f"{self.name}-")
        if (
            not prefix.startswith(f"{self.name}-")
            or split not in self.splits
            or not index.isdigit()
            or int(index) >= self.splits[split]
        ):
            raise ValueError(f"task_id: unknown {task_id!r} (expected {self.name}-<split>-<index>)")
        # a task depends only on its id: same on every machine and worker
        rng = np.random.default_rng(int(state_key(task_id)[:12], 16))
        return {"task_id": task_id, "split": split, **self.generate(rng)}

    def generate(self, rng: np.random.Generator) -> dict[str, Any]:
        raise NotImplementedError

    def setup(self, game: TextGame, task: dict[str, Any]) -> str:
        """What the seat is told at the start of the episode ``game.reset`` began."""
        raise NotImplementedError

    def validate(self, game: TextGame, task: dict[str, Any]) -> Validation:
        """The seat's score now; the envs pay it with each ``scored`` outcome."""
        raise NotImplementedError

    def expert_action(self, game: TextGame, task: dict[str, Any]) -> str:
        raise NotImplementedError

    def scripted_action(self, game: TextGame, task: dict[str, Any]) -> str:
        """The default opponent/partner, for a seat the learner does not control."""
        return self.expert_action(game, task)


def play(game: TextGame, task_sets: dict[str, SeatTask], actions: dict[str, str]) -> dict[str, Outcome]:
    """One ``step`` of ``game``, each agent's outcome completed with its seat's verdict."""
    outcomes = game.step(actions)
    for agent, outcome in outcomes.items():
        verdict = task_sets[agent].validate(game, game.task)
        if outcome.scored:
            outcome.observation += verdict.message
            outcome.reward = verdict.reward
            outcome.info.update(
                is_success=verdict.success,
                progress=verdict.progress,
                reward_components=dict(verdict.components),
            )
            if verdict.extra:
                outcome.info["extra"] = dict(verdict.extra)
        else:
            outcome.info.setdefault("progress", verdict.progress)
    return outcomes


def agent_info(
    game: TextGame,
    agent: str,
    episode_id: str,
    fields: dict[str, Any] | None = None,
    reward: float = 0.0,
    key: str | None = None,
) -> dict[str, Any]:
    """The StepInfo dict of one agent: the same keys as every single-agent env. ``key`` is the
    state key when the caller already computed it for this step (it is the same for all agents)."""
    fields = dict(fields or {})
    extra = {"agent": agent, **fields.pop("extra", {})}
    components = fields.pop("reward_components", None) or {"reward": reward}
    info = StepInfo(
        turn=game.turn,
        task_id=game.task["task_id"],
        episode_id=episode_id,
        state_key=key or state_key(game.state()),
        admissible_actions=game.admissible_actions(agent) if not game.over else None,
        reward_components=components,
        extra=extra,
        **fields,
    )
    if game.over and info.done_reason is None:
        info.done_reason = game.done_reason
    return info.to_dict()


def void_step(acting: list[str], errors: dict[str, str], retry: str = "Act again.") -> dict[str, Outcome]:
    """Outcomes of a void step (see the module docstring): ``errors`` maps each agent whose
    action was invalid to what was wrong. ``play`` adds the unchanged progress, so a void step
    reports the same state as the step before it."""
    out = {}
    for agent in acting:
        if agent in errors:
            out[agent] = Outcome(f"{errors[agent]} {retry}", {"action_valid": False, "parse_error": errors[agent]})
        else:
            out[agent] = Outcome(
                f"Another player's action was invalid, so nothing happened this turn "
                f"(yours did not take effect). {retry}",
                {"extra": {"void": True}},
            )
    return out


def parse_bracket(action: str, verb: str) -> str | None:
    """The text inside ``verb[...]`` (case-insensitive verb), or None when it is not that verb."""
    text = action.strip()
    if text.lower().startswith(verb + "[") and text.endswith("]"):
        return text[len(verb) + 1 : -1].strip()
    return None
