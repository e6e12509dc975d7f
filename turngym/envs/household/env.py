"""HouseholdEnv: the Gymnasium face of the household engine (one agent, one or two goals).

``HouseholdTask`` is its ``Task`` (core/task.py): the blueprints, their goals in order, success and
shaped progress; the env runs the engine's ``World`` (commands, observations, state)."""

from __future__ import annotations

from typing import Any

from turngym.core.env import TurnEnv
from turngym.core.task import Validation
from turngym.envs.household import alfworld_files, generator
from turngym.envs.household.commands import legacy_command, lenient_command
from turngym.envs.household.engine import NOT_ADMISSIBLE, READ_ONLY, World
from turngym.envs.household.expert import expert_action
from turngym.envs.household.generator import Blueprint
from turngym.envs.household.tasks import LOOK, Goal, goal_progress
from turngym.envs.household.wording import HEADER

AGENT = "agent"
# commands that cannot change any goal's progress (goals read hands, places, treatments and lit
# lamps; where the agent stands matters only to the lamp task): progress is not recomputed
_NO_PROGRESS = ("go ", "open ", "close ", "slice ")

INSTRUCTIONS = """\
You are an agent in a household. Each turn you read what happened and reply with exactly one \
command to solve the task given at the start.
Commands: go to [receptacle], open [receptacle], close [receptacle], take [object] from \
[receptacle], move [object] to [receptacle], heat [object] with [receptacle], cool [object] with \
[receptacle], clean [object] with [receptacle], use [lamp], slice [object] with [knife], \
examine [something], inventory, look, help.
Names carry their number, e.g. "mug 1", "countertop 2". You can hold one object at a time. \
Closed receptacles must be opened before you take from or put into them. Heat with a microwave, \
cool with a fridge, clean with a sinkbasin while holding the object.{listing}
A command that cannot be done answers "Nothing happens." and changes nothing."""
# what a command that cannot change any goal's progress scores: nothing
_UNCHANGED = Validation(components={"success": 0.0, "shaping": 0.0})
_INSTRUCTIONS = {
    False: INSTRUCTIONS.format(listing=""),
    True: INSTRUCTIONS.format(listing="\nOnly admissible commands work; the list of them is given each turn."),
}


class HouseholdTask:
    """The household's ``Task``. Its world is the engine's ``World``; the task keeps which of the
    blueprint's goals is being played and the progress made, so each gain is paid once."""

    def __init__(
        self,
        kind: str = "room",
        paraphrase: bool = False,
        reward_scale: float = 1.0,
        shaped_reward: float = 0.0,
    ):
        self.kind = kind
        self.paraphrase = paraphrase
        self.reward_scale = reward_scale
        self.shaped_reward = shaped_reward
        self.goal_index = 0
        self.progress = 0.0  # share of subgoals done now
        self.best_progress = 0.0  # the most so far: shaping pays each gain once

    def task_ids(self, split: str) -> list[str]:
        return list(generator.task_ids(self.kind, split))

    def get_task(self, task_id: str) -> dict[str, Any]:
        kind, split, rooms, tasks = generator.parse_task_id(task_id)
        if kind != self.kind:
            raise ValueError(f"task_id: {task_id!r} is a {kind!r} game; this env plays {self.kind!r} games")
        return {
            "task_id": task_id,
            "split": split,
            "rooms": [r for r, _ in rooms],
            "layouts": [i for _, i in rooms],
            "task_types": tasks,
        }

    def blueprint(self, task: dict[str, Any]) -> Blueprint:
        """The blueprint of a task row (the runtime builds its world from it)."""
        if "alfworld_game" in task:
            return alfworld_files.load_blueprint(task["alfworld_game"])
        self.get_task(task["task_id"])  # a row passed in options["task"]: same checks as an id
        return generator.build_blueprint(task["task_id"])

    def setup(self, world: World, task: dict[str, Any]) -> str:
        self.goal_index = 0
        self.progress = self.best_progress = 0.0
        return self.goal_texts(world)[0]

    def goal(self, world: World) -> Goal:
        """The goal being played now."""
        return world.blueprint.goals[self.goal_index]

    def goal_texts(self, world: World) -> tuple[str, ...]:
        blueprint = world.blueprint
        return blueprint.paraphrased_texts if self.paraphrase else blueprint.goal_texts

    def validate(self, world: World, task: dict[str, Any]) -> Validation:
        """Progress on the goal, moving on to the next goal once one is met (``message`` then
        announces it); success when the last goal is met; the shaping pays progress gains."""
        goals = world.blueprint.goals
        done = goal_progress(world, goals[self.goal_index])
        message = ""
        while done >= 1.0 and self.goal_index + 1 < len(goals):
            self.goal_index += 1
            message += f"\n\nYour next task is to: {self.goal_texts(world)[self.goal_index]}"
            done = goal_progress(world, goals[self.goal_index])
        success = done >= 1.0
        self.progress = (self.goal_index + done) / len(goals)
        gain = 0.0
        if self.progress > self.best_progress:
            gain = self.progress - self.best_progress
            self.best_progress = self.progress
        components = {
            "success": self.reward_scale if success else 0.0,
            "shaping": self.shaped_reward * self.reward_scale * gain,
        }
        return Validation(
            reward=components["success"] + components["shaping"],
            done=success,
            success=success,
            components=components,
            progress=self.progress,
            message=message,
        )

    def expert_action(self, world: World, task: dict[str, Any]) -> str:
        return expert_action(world, AGENT, self.goal(world))


class HouseholdEnv(TurnEnv):
    """ALFWorld-style household text world in pure Python.

    Text and commands are ALFWorld 0.4.2's. Options: ``kind`` room | easy | house | seq (which
    tasks), ``admissible_in_info`` (list the admissible commands in info),
    ``admissible_in_observation`` (also append them to each observation, for small models),
    ``lenient`` (forgiving parser), ``legacy_commands`` (also take the ReAct-era
    ``put X in/on Y``; the lenient parser takes it too), ``paraphrase`` (goal text
    with synonyms), ``reward_scale`` (success reward), ``shaped_reward`` (weight of the progress
    gain added each step), ``invalid_action_penalty`` (subtracted for an invalid command),
    ``reveal_contents`` (the first observation also says what lies on each open receptacle).
    ``reset(options={"task": {"alfworld_game": PATH}})`` plays an ALFWorld ``.tw-pddl`` game file.
    """

    default_split = "train"
    # pure Python with no C that can block and no process-wide state: serve-env may run its
    # sessions as threads in shared processes (light mode)
    shares_process = True
    # the state is the world and the task set's goal index and progress; the
    # generated blueprint is pickled as its task id (generator.Blueprint.__reduce_ex__)
    metadata = {**TurnEnv.metadata, "snapshots": True}

    def __init__(
        self,
        kind: str = "room",
        admissible_in_info: bool = True,
        admissible_in_observation: bool = False,
        lenient: bool = False,
        paraphrase: bool = False,
        reward_scale: float = 1.0,
        shaped_reward: float = 0.0,
        invalid_action_penalty: float = 0.0,
        reveal_contents: bool = False,
        legacy_commands: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if kind not in generator.KINDS:
            raise ValueError(f"kind: unknown {kind!r}; allowed: {list(generator.KINDS)}")
        if self.split not in generator.SPLITS:
            raise ValueError(f"split: unknown {self.split!r}; allowed: {list(generator.SPLITS)}")
        for name, value in (
            ("reward_scale", reward_scale),
            ("shaped_reward", shaped_reward),
            ("invalid_action_penalty", invalid_action_penalty),
        ):
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name}: must be a number >= 0, got {value!r}")
        self.admissible_in_info = admissible_in_info
        self.admissible_in_observation = admissible_in_observation
        self.lenient = lenient
        self.legacy_commands = legacy_commands
        self.task_set = HouseholdTask(kind, paraphrase, float(reward_scale), float(shaped_reward))
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.world: World | None = None
        self.reveal_contents = reveal_contents
        self.key = ""

    # ----- tasks ------------------------------------------------------------------------------------

    def _choose_task(self, options: dict[str, Any]) -> dict[str, Any]:
        task = options.get("task")
        if isinstance(task, dict) and "alfworld_game" in task and "task_id" not in task:
            # a game file is its own task: its path is its id
            options = {**options, "task": {**task, "task_id": f"alfworld:{task['alfworld_game']}"}}
        if "task" not in options and "task_id" not in options:
            # the base class's draw, from the cached tuple rather than a fresh list of 3,553 ids
            ids = generator.task_ids(self.task_set.kind, options.get("split", self.split))
            return self.get_task(ids[int(self.np_random.integers(0, len(ids)))])
        return super()._choose_task(options)

    # ----- episode ----------------------------------------------------------------------------------
    def _reset(self, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.world = World(self.task_set.blueprint(task), (AGENT,))
        goal = self.task_set.setup(self.world, task)
        self.key = self.world.key(0)
        intro = self.world.overview() if self.reveal_contents else self.world.intro()
        obs = f"{HEADER}\n\n{intro}\n\nYour task is to: {goal}"
        return self._observe(obs), self._fields(True, None, {"success": 0.0, "shaping": 0.0, "invalid_penalty": 0.0})

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        world = self.world
        command = legacy_command(action) if self.legacy_commands else action.strip()  # strict
        if self.lenient and not world.is_admissible(AGENT, command):
            command = lenient_command(action)
        obs, valid = world.execute(AGENT, command)
        # an invalid or read-only command changed nothing: key and progress stay as they were
        verdict = _UNCHANGED
        if valid and not command.startswith(READ_ONLY):
            if not command.startswith(_NO_PROGRESS) or (
                command[:3] == "go " and self.task_set.goal(world).task_type == LOOK
            ):
                verdict = self.task_set.validate(world, self.task)
                obs += verdict.message
            self.key = world.key(self.task_set.goal_index)
        success = verdict.success
        components = {**verdict.components, "invalid_penalty": 0.0 if valid else -self.invalid_action_penalty}
        fields = self._fields(valid, None if valid else NOT_ADMISSIBLE, components)
        if success:
            fields["done_reason"] = "success"
        reward = components["success"] + components["shaping"] + components["invalid_penalty"]
        if self.admissible_in_observation:
            obs = self._observe(obs)
        return obs, reward, success, False, fields

    def _observe(self, obs: str) -> str:
        if self.admissible_in_observation:
            obs += "\n\nAdmissible actions: " + ", ".join(self.world.admissible(AGENT))
        return obs

    def _fields(self, valid: bool, parse_error: str | None, components: dict[str, float]) -> dict[str, Any]:
        world, task_set = self.world, self.task_set
        return {
            "state_key": self.key,
            "admissible_actions": list(world.admissible(AGENT)) if self.admissible_in_info else None,
            "action_valid": valid,
            "parse_error": parse_error,
            "progress": task_set.progress,
            "is_success": task_set.progress >= 1.0,
            "reward_components": components,
            "extra": {
                "task_type": task_set.goal(world).task_type,
                "goal": task_set.goal_texts(world)[task_set.goal_index],
                "goal_index": task_set.goal_index,
            },
        }

    # ----- the rest of the contract -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        if self.world is None:
            return {}
        return {**self.world.state_dict(), "goal_index": self.task_set.goal_index}

    def admissible_actions(self) -> list[str] | None:
        if self.world is None or not self.admissible_in_info:
            return None
        return list(self.world.admissible(AGENT))

    def instructions(self) -> str:
        return _INSTRUCTIONS[self.admissible_in_info]

    def expert_action(self) -> str:
        if self.world is None:
            raise RuntimeError("call reset() before expert_action()")
        return self.task_set.expert_action(self.world, self.task)
