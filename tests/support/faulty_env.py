"""A Counter env with faults on command, for the EnvPool fault tests (importable by spawned
workers and Ray actors: it lives next to contract_env on the tests' import path)."""

from __future__ import annotations

import os
import sys
import time

from contract_env import CounterEnv

import turngym

#: task id -> the fault its first step triggers
FAULTS = {"counter-2": "hang", "counter-3": "exit", "counter-4": "die", "counter-6": "slow"}


class FaultyCounter(CounterEnv):
    def _step(self, action):
        fault = action.strip()
        if fault == "hang":  # a pure-Python hang (short sleeps: an abandoned thread can be stopped)
            while True:
                time.sleep(0.05)
        if fault == "exit":
            sys.exit(3)
        if fault == "die":
            os._exit(1)
        if fault == "slow":
            time.sleep(0.4)
            return "Counter unchanged.", 0.0, False, False, {}
        return super()._step(action)


class FaultPolicy:
    """Env-side expert that sends the task's fault (if any) instead of its first action;
    ``only`` limits which faults fire."""

    env_side = True

    def __init__(self, only=("hang", "exit", "die", "slow")):
        self.only = tuple(only)

    def act_in_env(self, env):
        fault = FAULTS.get(env.task["task_id"])
        if fault in self.only and (fault == "slow" or env.turn == 0):
            return fault
        return env.unwrapped.expert_action()


def register() -> None:
    turngym.register(
        "turngym-tests/Faulty-v0",
        "faulty_env:FaultyCounter",
        max_episode_steps=20,
        description="Counter with hangs, exits and crashes on command",
        family="tests",
    )
