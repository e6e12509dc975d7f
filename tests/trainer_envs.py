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


class AlternateEEnv(CounterEnv):
    """Two turns with opposite rules: turn 1 wants a reply without the letter 'e', turn 2 one
    with it. Each turn that keeps its rule earns 0.5; success is keeping both.

    The multi-turn must-learn test trains on it. A policy can only learn it by crediting each
    turn with its own outcome and conditioning on the turn's instruction: advantages laid on the
    wrong turn, or a loss mask shifted off the reply's tokens, push one turn's tokens by the
    other's rule. The true state is the turn, so every group shares one anchor state per turn
    (GiGPO's step groups).
    """

    RULES = ("Reply with a word that has no letter e.", "Now reply with a word that has the letter e.")

    def instructions(self):
        return "Follow each turn's rule."

    def state(self):
        return {"turn": self.turn_index, "done": self._done}

    def _reset(self, task):
        self.turn_index, self.kept = 0, 0
        return self.RULES[0], {}

    def _step(self, action):
        has_e = "e" in action.lower()
        ok = bool(action.strip()) and (has_e if self.turn_index == 1 else not has_e)
        self.kept += ok
        self.turn_index += 1
        done = self.turn_index == len(self.RULES)
        obs = ("Kept." if ok else "Broken.") + ("" if done else " " + self.RULES[self.turn_index])
        success = done and self.kept == len(self.RULES)
        return obs, 0.5 * ok, done, False, {"is_success": success, "progress": self.kept / len(self.RULES)}

    def expert_action(self):
        return "yes" if self.turn_index == 1 else "ok"


ALTERNATE_ID = "turngym-tests/AlternateE-v0"
if ALTERNATE_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(ALTERNATE_ID, "trainer_envs:AlternateEEnv", max_episode_steps=2,
                     description="Two turns, opposite rules (the multi-turn must-learn test)", family="tests")
