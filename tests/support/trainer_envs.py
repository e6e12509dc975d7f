"""A Counter variant with a dense, text-dependent reward, so a random tiny model gets rewards
that differ inside a group (the trainer tests need non-zero advantages to move weights).

Importing this module registers ``turngym-tests/ShapedCounter-v0`` and its snapshot-capable twin
``turngym-tests/BranchingCounter-v0`` (the trainer's subprocess
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
    turngym.register(
        ENV_ID,
        "trainer_envs:ShapedCounterEnv",
        max_episode_steps=20,
        description="Counter with a text-dependent dense reward (trainer tests)",
        family="tests",
    )


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
        return (
            ("Good." if ok else "It has an e."),
            float(ok),
            True,
            False,
            {"is_success": ok, "progress": float(ok)},
        )

    def expert_action(self):
        return "ok"


NO_E_ID = "turngym-tests/NoLetterE-v0"
if NO_E_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(
        NO_E_ID,
        "trainer_envs:NoLetterEEnv",
        max_episode_steps=1,
        description="One turn: reply without the letter e (the must-learn test)",
        family="tests",
    )


class NoLetterETwiceEnv(CounterEnv):
    """Two turns, each asking for a reply without the letter 'e'. Each turn that keeps the rule
    earns 0.5; success is keeping both (about 5% of a random tiny model's episodes).

    The multi-turn must-learn test trains on it. The state is (turn, turns kept so far), so
    GiGPO's step groups at turn 2 split by how turn 1 went (groups of unequal size, singletons
    with a zero step term), as in a real multi-turn env.

    Why not two turns with opposite rules (no 'e', then an 'e')? Per-turn credit would matter
    most there, but the tiny random model does not learn it reliably in RL: its last hidden state
    barely depends on the turn (cosine 0.99 between the two turns' prompts), so a step that raises
    a reply token on one turn raises it on the other; the policy stayed at chance or collapsed
    onto one token that keeps one rule, where every group ties and learning stops (18 of 19 runs
    over learning rates, adapters, seeds and prompts; see docs/training.md). Whether each turn's advantage lands on its own tokens is checked directly
    in tests/trainers/test_losses.py.
    """

    RULE = "Reply with a word that has no letter e."

    def instructions(self):
        return "Follow the rule on every turn."

    def admissible_actions(self):
        return None  # free text: no Counter actions under the observation

    def state(self):
        return {"turn": self.turn_index, "kept": self.kept, "done": self._done}

    def _reset(self, task):
        self.turn_index, self.kept = 0, 0
        return "Turn 1. " + self.RULE, {}

    def _step(self, action):
        ok = bool(action.strip()) and "e" not in action.lower()
        self.kept += ok
        self.turn_index += 1
        done = self.turn_index == 2
        obs = ("Kept." if ok else "Broken.") + ("" if done else " Turn 2. " + self.RULE)
        return obs, 0.5 * ok, done, False, {"is_success": done and self.kept == 2, "progress": self.kept / 2}

    def expert_action(self):
        return "ok"


TWICE_ID = "turngym-tests/NoLetterETwice-v0"
if TWICE_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(
        TWICE_ID,
        "trainer_envs:NoLetterETwiceEnv",
        max_episode_steps=2,
        description="Two turns without the letter e (the multi-turn must-learn test)",
        family="tests",
    )


class BranchingCounterEnv(ShapedCounterEnv):
    """ShapedCounter with snapshots declared: tree rollouts and sibling credit run on it."""

    metadata = {**ShapedCounterEnv.metadata, "snapshots": True}


BRANCHING_ID = "turngym-tests/BranchingCounter-v0"
if BRANCHING_ID not in {s.id for s in turngym.list_envs()}:
    turngym.register(
        BRANCHING_ID,
        "trainer_envs:BranchingCounterEnv",
        max_episode_steps=20,
        description="ShapedCounter with snapshots (tree rollout tests)",
        family="tests",
    )
