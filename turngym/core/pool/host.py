"""The env host: owns the envs of some slots and runs operations on them, one at a time.

An op is ``("reset", slot, seed, options)``, ``("step", slot, action)``, ``("env_side", slot,
policy)``, or, for tree rollouts, ``("snapshot", slot)`` and ``("restore", slot, snapshot)``; its
result is ``(slot, "ok", payload)`` or ``(slot, "error", reason)``. Every backend
runs hosts of this class, in this thread, a thread, a process or a Ray actor.
"""

from __future__ import annotations

import traceback
from typing import Any

from turngym.core.registry import TAGS, make, register

Op = tuple  # ("reset", slot, seed, options) | ("step", slot, action) | ("env_side", slot, policy) | ...
Result = tuple  # (slot, "ok", payload) | (slot, "error", reason)
HostArgs = tuple  # (registration(env_id), env_kwargs, slots): what builds one host


class StepTimeout(BaseException):
    """Raised inside an env op that ran past its deadline (inline backend, and in an abandoned
    thread). A BaseException so that an env's own ``except Exception`` cannot swallow it. Its
    message is the episode's whole reason (``step timed out: ...`` or ``episode timed out: ...``)."""


class EnvHost:
    def __init__(self, env_registration: dict[str, Any], env_kwargs: dict[str, Any], slots: list[int]):
        if env_registration["id"] not in TAGS:  # a fresh process has only the built-in envs
            register(**env_registration)
        self.env_id = env_registration["id"]
        self.env_kwargs = env_kwargs
        self.envs = {slot: None for slot in slots}

    def _env(self, slot: int):
        if self.envs[slot] is None:
            self.envs[slot] = make(self.env_id, **self.env_kwargs)
        return self.envs[slot]

    def run_one(self, op: Op) -> Result:
        kind, slot = op[0], op[1]
        try:
            env = self._env(slot)
            if kind == "reset":
                return (slot, "ok", env.reset(seed=op[2], options=op[3]))
            if kind == "step":
                return (slot, "ok", (op[2], *env.step(op[2])))
            if kind == "env_side":
                action = op[2].act_in_env(env)
                return (slot, "ok", (action, *env.step(action)))
            if kind == "snapshot":
                return (slot, "ok", env.snapshot())
            if kind == "restore":  # answers as reset does: (observation, info)
                return (slot, "ok", env.restore(op[2]))
            raise ValueError(f"unknown op {kind!r}")
        except KeyboardInterrupt:
            raise
        # SystemExit and StepTimeout too: an env calling sys.exit() must not take the pool down
        except BaseException as e:  # noqa: BLE001 - the env crashed: rebuild it, episode unscorable
            reason = (str(e) or "step timed out") if isinstance(e, StepTimeout) else traceback.format_exc(limit=8)
            self._discard(slot)
            return (slot, "error", reason)

    def run(self, ops: list[Op]) -> list[Result]:
        return [self.run_one(op) for op in ops]

    def ping(self) -> bool:
        """Answers once the host is built (remote backends wait for it before timing ops)."""
        return True

    def _discard(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        try:
            if env is not None:
                env.close()
        except BaseException:  # noqa: BLE001 - a broken env may fail to close too
            pass

    def close(self) -> None:
        for slot in list(self.envs):
            self._discard(slot)
