"""TurnEnv: the Gymnasium base class every turngym environment builds on.

A subclass implements four hooks and gets the rest of the contract (task choice, seeding,
turn limits, StepInfo with the same keys everywhere) from this class:

    task_ids(split)      -> stable ids of the tasks in a split
    get_task(task_id)    -> the task row (a JSON-serialisable dict with "task_id")
    _reset(task)         -> (observation, info fields)
    _step(action)        -> (observation, reward, terminated, truncated, info fields)

and optionally ``state(self)`` (the canonical true state, hashed into ``state_key``; the
default is the turn and the last observation),
``admissible_actions()``, ``tools()`` (JSON-schema specs for tools mode), ``instructions()``
(the system prompt) and ``expert_action()`` (the oracle).

The task side (rows, set-up, validation, expert) lives in a ``Task`` object (``core/task.py``)
that the env keeps in ``self.task_set``; ``task_ids`` and ``get_task`` default to it.

An infrastructure failure (a sandbox, a browser) is not the agent's: ``fail_infra`` marks the
episode unscorable, and every step from then until the next reset has ``scorable=False``.

The turn limit is decided here and nowhere else: ``max_turns`` (the constructor's, else the
registered ``max_episode_steps``), lowered for one episode by ``reset(options={"max_turns": n})``
(how ``EnvPool.rollout(max_turns=...)`` passes its budget). The step that reaches it is
truncated with ``done_reason="max_turns"``, and every step that ends an episode has a
``done_reason``. ``turngym.register`` registers ids with Gymnasium without a ``max_episode_steps``,
so ``gymnasium.make`` adds no ``TimeLimit`` on top; ``env.spec.max_episode_steps`` still shows
the registered limit.

Snapshots (``metadata["snapshots"]`` true): ``snapshot()`` returns the env's whole state as an
opaque, immutable, picklable ``Snapshot`` (core/snapshot.py); ``restore(snapshot)``, or
``reset(options={"snapshot": snapshot})`` through Gymnasium's wrappers, puts this env, or a fresh
one made from the same id, back in that state, so the same actions give the same observations,
rewards and infos. The state is every instance attribute but those named in ``snapshot_shared``
(objects fixed at construction or shared between envs: they are pickled by name) and the spec
and spaces; a family with state outside its attributes overrides ``_snapshot_state`` and
``_restore_state``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from turngym.core.keys import episode_id, state_key
from turngym.core.snapshot import Snapshot, SnapshotUnsupported, check_origin, dump_state, load_state
from turngym.core.spaces import UnicodeText
from turngym.core.task import Task


@dataclass
class StepInfo:
    """The ``info`` dict of every turngym env; every key is present on every step."""

    turn: int = 0
    task_id: str = ""
    episode_id: str = ""
    state_key: str = ""
    admissible_actions: list[str] | None = None
    action_valid: bool = True
    parse_error: str | None = None
    messages: list[dict] = field(default_factory=list)
    tools: list[dict] | None = None
    reward_components: dict[str, float] = field(default_factory=dict)
    progress: float = 0.0
    is_success: bool = False
    done_reason: str | None = None
    scorable: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # the fields, in their order (a plain dataclass: no other attributes)


STEP_INFO_KEYS = tuple(f.name for f in dataclasses.fields(StepInfo))
_STEP_INFO_KEY_SET = frozenset(STEP_INFO_KEYS)
_STEP_INFO_DEFAULTS = StepInfo().to_dict()  # its lists and dicts are always replaced in _info


class ResetNeeded(gym.error.ResetNeeded, RuntimeError):
    """``step`` was called before ``reset`` or after the episode ended (terminated or truncated):
    call ``reset()`` first. A subclass of Gymnasium's ``ResetNeeded`` and of ``RuntimeError``, so
    either ``except`` catches it; the env server answers it with HTTP 409."""


#: attributes that are never part of a snapshot: they say what the env is, not where it stands
_NOT_STATE = frozenset({"_spec", "observation_space", "action_space", "metadata"})

#: errors an engine raises on pathological input rather than on a bug of its own
_INPUT_BLOWUPS = (RecursionError, MemoryError, UnicodeError)


class TurnEnv(gym.Env[str, str]):
    """Base class: text actions in, text observations out, StepInfo in ``info``."""

    #: ``snapshots``: whether snapshot()/restore() work (a declared capability; families that
    #: support them set it True)
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1, "snapshots": False}
    #: attributes a snapshot names instead of copying (see the module docstring)
    snapshot_shared: tuple[str, ...] = ()
    #: the split tasks are drawn from when reset() names none
    default_split: str = "train"
    #: the task side of the env (rows, set-up, validation, expert), its task set; see core/task.py.
    #: ``task`` is the current episode's row.
    task_set: Task | None = None
    _spec = None  # behind the ``spec`` property

    def __init__(self, *, split: str | None = None, max_turns: int | None = None, render_mode: str | None = None):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} is not supported; allowed: None, 'ansi'")
        self.render_mode = render_mode
        self.split = split or self.default_split
        self.max_turns = max_turns
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.task: dict[str, Any] | None = None
        self.turn = 0
        self.episode_id = ""
        self.episode_seed = 0
        self._last_observation = ""
        self._last_info: dict[str, Any] = {}
        self._done = False
        self._reset_max_turns: int | None = None
        #: (done_reason, error) once the infrastructure failed this episode; see fail_infra
        self.infra_failure: tuple[str, str] | None = None

    # ----- the spec and the turn limit ----------------------------------------------------------
    @property
    def spec(self):
        return self._spec

    @spec.setter
    def spec(self, value) -> None:
        # gymnasium.make hands the env a spec without max_episode_steps (turngym registers none
        # with Gymnasium, so that no TimeLimit wraps the env): fill in the registered limit
        if value is not None and value.max_episode_steps is None:
            from turngym.core.registry import registered_max_turns

            limit = registered_max_turns(value.id)
            if limit is not None:
                value = dataclasses.replace(value, max_episode_steps=limit)
        self._spec = value

    def episode_max_turns(self) -> int | None:
        """The turn this episode is truncated at: the smaller of ``max_turns`` (else the spec's
        ``max_episode_steps``) and the reset's ``options["max_turns"]``; None: no limit."""
        own = self.max_turns or (self._spec.max_episode_steps if self._spec is not None else None)
        budget = self._reset_max_turns
        if own and budget:
            return min(own, budget)
        return own or budget or None

    @property
    def tasks(self) -> Task | None:
        """``task_set``'s old name, kept so that envs written before still set and read it."""
        return self.task_set

    @tasks.setter
    def tasks(self, value: Task | None) -> None:
        self.task_set = value

    # ----- hooks for subclasses -------------------------------------------------------------
    def task_ids(self, split: str | None = None) -> list[str]:
        if self.task_set is None:
            raise NotImplementedError
        return self.task_set.task_ids(split or self.split)

    def get_task(self, task_id: str) -> dict[str, Any]:
        if self.task_set is None:
            raise NotImplementedError
        return self.task_set.get_task(task_id)

    def _reset(self, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        raise NotImplementedError

    def state(self) -> Any:
        """The canonical true state; its hash is ``info['state_key']``.

        This default cannot see the true state, so it keys on the turn and the last
        observation: two states share a key only when both agree (GiGPO-style estimators then
        merge nothing across turns). Every registered env overrides it with its true state;
        changing the default would change the keys of envs that keep it."""
        return {"turn": self.turn, "observation": self._last_observation}

    def admissible_actions(self) -> list[str] | None:
        return None

    def tools(self) -> list[dict] | None:
        return None

    def instructions(self) -> str:
        """System prompt: what the agent is and which actions it may take."""
        return ""

    def expert_action(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} has no expert")

    def fail_infra(self, reason: str, error: str) -> None:
        """The infrastructure failed, not the agent: this episode cannot be scored. Every step
        from now until the next reset reports ``scorable=False``; ``reason`` is the done_reason
        the env reports when it ends the episode for it."""
        self.infra_failure = (reason, error)

    # ----- Gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        if "snapshot" in options:
            if seed is not None or len(options) > 1:
                raise ValueError(
                    "reset options: 'snapshot' goes alone (no seed, no other option): the "
                    "snapshot fixes the whole state"
                )
            try:
                return self.restore(options["snapshot"])
            except SnapshotUnsupported as e:  # a bad option, as any other (the env server: 400)
                raise ValueError(f"reset options: snapshot: {e}") from None
        super().reset(seed=seed)
        unknown = set(options) - {"task_id", "split", "task", "max_turns"}
        if unknown:
            raise ValueError(
                f"reset options: unknown keys {sorted(unknown)}; allowed: task_id, split, task, max_turns, snapshot"
            )
        budget = options.pop("max_turns", None)
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget < 1:
                raise ValueError(f"reset options: max_turns must be an int >= 1 or None, got {budget!r}")
            budget = int(budget)
        # Everything random in the episode derives from this seed, drawn from np_random so
        # that reset(seed=s) fixes the whole episode.
        self.episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        task = self._choose_task(options)
        self.task = task
        self.turn = 0
        self._done = False
        self._reset_max_turns = budget
        self.infra_failure = None
        spec_id = self.spec.id if self.spec is not None else type(self).__name__
        self.episode_id = episode_id(spec_id, task["task_id"], self.episode_seed)
        obs, fields = self._reset(task)
        fields = dict(fields)
        fields.setdefault("tools", self.tools())
        fields.setdefault("messages", _reset_messages(self.instructions(), obs))
        info = self._info(obs, 0.0, fields)
        self._last_observation, self._last_info = obs, info
        return obs, info

    def _choose_task(self, options: dict[str, Any]) -> dict[str, Any]:
        if "task" in options:
            task = dict(options["task"])
            if "task_id" not in task:
                raise ValueError("reset options: 'task' must be a dict with a 'task_id' key")
            return task
        if "task_id" in options:
            return self.get_task(str(options["task_id"]))
        split = options.get("split", self.split)
        ids = self.task_ids(split)
        if not ids:
            raise ValueError(f"split: {split!r} has no tasks")
        return self.get_task(ids[int(self.np_random.integers(0, len(ids)))])

    def step(self, action: str):
        """One turn. ``action`` must be a ``str``; anything else raises ``TypeError``.

        A str that cannot be parsed or carried out never raises: it returns an observation
        saying why, ``action_valid=False``, and the state is unchanged.

        A step before ``reset()``, or after a step that returned ``terminated`` or ``truncated``,
        raises ``ResetNeeded`` (the same in every family: nothing is stepped, nothing changes).
        """
        if self.task is None:
            raise ResetNeeded("call reset() before step()")
        if self._done:
            # one behaviour for every env: an ended episode's engine is never stepped again
            raise ResetNeeded(
                f"the episode ended at turn {self.turn} (terminated or truncated): call reset() before step()"
            )
        if not isinstance(action, str):
            # str(None) == "None" and str(["look"]) would run as commands: refuse instead.
            raise TypeError(f"action: expected str (a model completion or command), got {type(action).__name__}")
        self.turn += 1
        try:
            obs, reward, terminated, truncated, fields = self._step(action)
        except _INPUT_BLOWUPS as e:
            obs, reward, terminated, truncated, fields = self._unhandled_action(e)
        fields = dict(fields)
        limit = self.episode_max_turns()
        if limit and self.turn >= limit and not terminated:
            truncated = True
            fields.setdefault("done_reason", "max_turns")
        if terminated or truncated:
            fields.setdefault("done_reason", "terminated" if terminated else "truncated")
            self._done = True
        fields.setdefault("messages", [{"role": "user", "content": obs}])
        info = self._info(obs, float(reward), fields)
        self._last_observation, self._last_info = obs, info
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _unhandled_action(self, error: BaseException):
        """A parser or engine that blew up on odd input (deep nesting, huge or unencodable
        text): the action counts as invalid. Engines parse before they change anything, so the
        state is still the one before the action."""
        reason = f"the action could not be read ({type(error).__name__}: {str(error)[:200]})"
        obs = f"Invalid action: {reason}. Nothing happened."
        return obs, 0.0, False, False, {"action_valid": False, "parse_error": reason}

    def _info(self, obs: str, reward: float, fields: dict[str, Any]) -> dict[str, Any]:
        self._last_observation = obs
        extra = fields.pop("extra", {})
        if not _STEP_INFO_KEY_SET.issuperset(fields):  # env-specific keys go under "extra"
            unknown = fields.keys() - _STEP_INFO_KEY_SET  # so every env has the same keys
            extra = {**extra, **{k: fields.pop(k) for k in sorted(unknown)}}
        components = fields.pop("reward_components", None) or {"reward": reward}
        if not math.isclose(sum(components.values()), reward, abs_tol=1e-6):
            raise AssertionError(f"reward_components {components} do not sum to reward {reward}")
        # what StepInfo(...).to_dict() gives, built directly: this runs on every step
        info = dict(_STEP_INFO_DEFAULTS)
        info.update(fields)
        info["turn"] = self.turn
        info["task_id"] = str(self.task["task_id"])
        info["episode_id"] = self.episode_id
        info["state_key"] = fields.get("state_key") or state_key(self.state())
        if "admissible_actions" not in fields:
            info["admissible_actions"] = self.admissible_actions()
        if "messages" not in fields:
            info["messages"] = []
        info["reward_components"] = components
        info["extra"] = extra
        if self.infra_failure is not None:
            info["scorable"] = False
        return info

    # ----- snapshots ---------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The env's whole state now (task, turn, episode id, RNGs, engine, caches that shape what
        it shows), as an opaque, immutable, picklable value; ``restore`` goes back to it.
        Raises ``SnapshotUnsupported`` on an env without the capability."""
        name = self._require_snapshots()
        return Snapshot(name, self.turn, dump_state(self._snapshot_state(), self._shared_objects()))

    def restore(self, snapshot: Snapshot) -> tuple[str, dict[str, Any]]:
        """Put this env in the state ``snapshot`` holds (taken from this env or from another made
        from the same id); the snapshot itself never changes. Returns the observation and info
        of the reset or step that led to that state, as ``reset`` does."""
        check_origin(snapshot, self._require_snapshots())
        self._restore_state(load_state(snapshot.state, self._shared_objects()))
        return self._last_observation, self._last_info

    def _require_snapshots(self) -> str:
        name = self._spec.id if self._spec is not None else f"{type(self).__module__}.{type(self).__qualname__}"
        if not self.metadata.get("snapshots"):
            raise SnapshotUnsupported(
                f"{name} does not support snapshot()/restore() "
                "(metadata['snapshots'] is false; `turngym list` shows which envs do)"
            )
        return name

    def _shared_objects(self) -> dict[str, Any]:
        """Name -> object for what a snapshot refers to instead of copying."""
        return {name: getattr(self, name) for name in self.snapshot_shared if hasattr(self, name)}

    def _not_state(self) -> frozenset[str]:
        return _NOT_STATE.union(self.snapshot_shared)

    def _snapshot_state(self) -> dict[str, Any]:
        skip = self._not_state()
        return {k: v for k, v in vars(self).items() if k not in skip}

    def _restore_state(self, state: dict[str, Any]) -> None:
        skip = self._not_state()
        for name in [k for k in vars(self) if k not in skip and k not in state]:
            delattr(self, name)  # set after the snapshot was taken (a first reset's attributes)
        vars(self).update(state)

    def render(self):
        if self.render_mode == "ansi":
            return self._last_observation
        return None

    def close(self):
        # Idempotent: closing twice is fine for every env.
        self.task = None


def _reset_messages(instructions: str, obs: str) -> list[dict]:
    messages = [{"role": "system", "content": instructions}] if instructions else []
    return messages + [{"role": "user", "content": obs}]
