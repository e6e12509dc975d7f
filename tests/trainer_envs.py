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
