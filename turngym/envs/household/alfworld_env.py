"""``turngym/ALFWorld-v0``: ALFWorld game files played by the real engine, with turngym's StepInfo.

The engine is TextWorld 1.7's PDDL environment (ALFWorld 0.4.2's ``alfred.pddl`` and
``alfred.twl2`` travel inside each game file), with ALFWorld's own renaming of the PDDL ids
(``AlfredDemangler``): what ALFWorld's ``AlfredTWEnv`` plays, minus its batching. It needs the
``alfworld`` extra (``pip install 'turngym[alfworld]'``: ``alfworld`` and ``textworld[pddl]``,
which compiles the GPL-3 fast-downward planner); the default household never imports it.

Games: ``reset(options={"task": {"alfworld_game": PATH}})`` plays one file; ``task_ids(split)``
lists ``game.tw-pddl`` files under ``games`` (a folder with ``train``, ``valid_seen`` and
``valid_unseen`` sub-folders, as ALFWorld's ``json_2.1.1``; default ``$ALFWORLD_DATA/json_2.1.1``).
Files with ``"solvable": false`` are skipped, as ALFWorld does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from turngym.core.env import TurnEnv
from turngym.core.keys import state_key
from turngym.core.task import Validation
from turngym.envs.household.engine import NOT_ADMISSIBLE

SPLITS = ("train", "valid_seen", "valid_unseen")


def _engine():
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
        from textworld.envs.pddl import PddlEnv
    except ImportError as err:
        raise ImportError(
            "turngym/ALFWorld-v0 needs the real engine: pip install 'turngym[alfworld]' "
            f"(alfworld==0.4.2 and textworld[pddl]==1.7.0); missing: {err.name}"
        ) from None
    infos = textworld.EnvInfos(admissible_commands=True, won=True, facts=True)
    return AlfredDemangler(shuffle=False)(PddlEnv(infos))


class ALFWorldTask:
    """ALFWorld-v0's ``Task``: the game files under ``games``, won when the engine says so. Its
    world is the engine's game state as the last reset or step left it (the runtime loads and
    resets the file); it has no expert."""

    def __init__(self, games: Path, reward_scale: float = 1.0):
        self.games = games
        self.reward_scale = reward_scale

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"split: unknown {split!r}; allowed: {list(SPLITS)}")
        root = self.games / split if (self.games / split).is_dir() else self.games
        found = sorted(str(p) for p in root.rglob("*.tw-pddl")) if root.is_dir() else []
        return [p for p in found if json.loads(Path(p).read_text()).get("solvable", True)]

    def get_task(self, task_id: str) -> dict[str, Any]:
        if not Path(task_id).is_file():
            raise ValueError(f"task_id: {task_id!r} is not an ALFWorld game file (a path to *.tw-pddl)")
        return {"task_id": task_id, "alfworld_game": task_id}

    def setup(self, state, task: dict[str, Any]) -> str:
        return state.feedback

    def validate(self, state, task: dict[str, Any]) -> Validation:
        won = bool(state["won"])
        reward = self.reward_scale if won else 0.0
        return Validation(
            reward=reward, done=won, success=won, progress=1.0 if won else 0.0, components={"success": reward}
        )

    def expert_action(self, state, task: dict[str, Any]) -> str:
        raise NotImplementedError("turngym/ALFWorld-v0 has no expert")


class ALFWorldEnv(TurnEnv):
    """ALFWorld through TextWorld's PDDL engine. Options: ``games`` (folder of game files),
    ``admissible_in_info``, ``reward_scale``."""

    default_split = "train"

    def __init__(
        self,
        games: str | None = None,
        admissible_in_info: bool = True,
        reward_scale: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if self.split not in SPLITS:
            raise ValueError(f"split: unknown {self.split!r}; allowed: {list(SPLITS)}")
        if not isinstance(reward_scale, (int, float)) or reward_scale < 0:
            raise ValueError(f"reward_scale: must be a number >= 0, got {reward_scale!r}")
        default = Path(os.environ.get("ALFWORLD_DATA", "~/.cache/alfworld")).expanduser() / "json_2.1.1"
        self.task_set = ALFWorldTask(Path(games).expanduser() if games else default, float(reward_scale))
        self.admissible_in_info = admissible_in_info
        self._env = None  # made on the first reset: importing the engine is slow
        self._state = None
        self._facts_key = ""

    def _choose_task(self, options: dict[str, Any]) -> dict[str, Any]:
        task = options.get("task")
        if isinstance(task, dict) and "alfworld_game" in task and "task_id" not in task:
            options = {**options, "task": {**task, "task_id": str(task["alfworld_game"])}}
        return super()._choose_task(options)

    def _reset(self, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = str(task.get("alfworld_game", task["task_id"]))
        if not Path(path).is_file():
            raise ValueError(f"alfworld_game: no such game file {path!r}")
        if self._env is None:
            self._env = _engine()
        self._env.load(path)
        self._state = self._env.reset()
        return self.task_set.setup(self._state, task), self._fields(True, 0.0)

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        valid = action.strip() in self._state["admissible_commands"]
        self._state, _, _ = self._env.step(action)
        verdict = self.task_set.validate(self._state, self.task)
        fields = self._fields(valid, verdict.reward)
        if verdict.success:
            fields["done_reason"] = "success"
        return self._state.feedback, verdict.reward, verdict.done, False, fields

    def _fields(self, valid: bool, reward: float) -> dict[str, Any]:
        state = self._state
        # the true state is the engine's set of facts (names as ALFWorld shows them)
        self._facts_key = state_key(sorted(str(f) for f in state["facts"]))
        won = bool(state["won"])
        return {
            "state_key": self._facts_key,
            "admissible_actions": list(state["admissible_commands"]) if self.admissible_in_info else None,
            "action_valid": valid,
            "parse_error": None if valid else NOT_ADMISSIBLE,
            "progress": 1.0 if won else 0.0,
            "is_success": won,
            "reward_components": {"success": reward},
        }

    def state(self) -> dict[str, Any]:
        if self._state is None:
            return {}
        return {"facts": sorted(str(f) for f in self._state["facts"])}

    def admissible_actions(self) -> list[str] | None:
        if self._state is None or not self.admissible_in_info:
            return None
        return list(self._state["admissible_commands"])

    def instructions(self) -> str:
        from turngym.envs.household.env import INSTRUCTIONS

        return INSTRUCTIONS.format(listing="\nOnly admissible commands work; the list of them is given each turn.")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
