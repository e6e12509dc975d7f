"""A Counter variant with a dense, text-dependent reward, so a random tiny model gets rewards
that differ inside a group (the trainer tests need non-zero advantages to move weights).

Importing this module registers ``turngym-tests/ShapedCounter-v0`` (the trainer's subprocess
tests import it with ``turngym train --env-module trainer_envs``).
"""

from __future__ import annotations

from contract_env import CounterEnv

import turngym


class ShapedCounterEnv(CounterEnv):
    """Counter, plus 0.5 reward on every turn whose reply contains the letter 'e'."""

    def _step(self, action):
        obs, reward, terminated, truncated, fields = super()._step(action)
        bonus = 0.5 if "e" in action.lower() else 0.0
        components = {"task": reward, "shaping": bonus}
        return obs, reward + bonus, terminated, truncated, {**fields, "reward_components": components}


ENV_ID = "turngym-tests/ShapedCounter-v0"
if ENV_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(ENV_ID, "trainer_envs:ShapedCounterEnv", max_episode_steps=20,
                     description="Counter with a text-dependent dense reward (trainer tests)", family="tests")


class NoLetterEEnv(CounterEnv):
    """One turn: reply with text that has no letter 'e' (success, reward 1) or not (reward 0).

    Trivially learnable by a random-init model: a fair share of its sampled replies already
    succeed, and a policy gradient only has to move probability toward tokens without an 'e'.
    The must-learn test trains on it.
    """

    def instructions(self):
        return "Reply with anything that has no letter e."

    def _reset(self, task):
        return "Your reply?", {}

    def _step(self, action):
        ok = bool(action.strip()) and "e" not in action.lower()
        return ("Good." if ok else "It has an e."), float(ok), True, False, {"is_success": ok, "progress": float(ok)}

    def expert_action(self):
        return "ok"


NO_E_ID = "turngym-tests/NoLetterE-v0"
if NO_E_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(NO_E_ID, "trainer_envs:NoLetterEEnv", max_episode_steps=1,
                     description="One turn: reply without the letter e (the must-learn test)", family="tests")
