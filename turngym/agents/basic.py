"""Policies that need no model: the env's oracle, random play, a person at the terminal."""

from __future__ import annotations

import numpy as np

from turngym.core.policy import Conversation


class ExpertPolicy:
    """Plays each env's oracle (``env.expert_action()``), inside the worker that owns the env."""

    env_side = True

    def act_in_env(self, env) -> str:
        return env.unwrapped.expert_action()

    def act(self, conversations: list[Conversation]) -> list[str]:
        raise TypeError("ExpertPolicy reads the true env state; run it through EnvPool (env_side)")


class RandomPolicy:
    """Uniform over ``admissible_actions`` when the env offers them, random text otherwise."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def act(self, conversations: list[Conversation]) -> list[str]:
        out = []
        for conv in conversations:
            actions = conv.info.get("admissible_actions")
            if actions:
                out.append(actions[int(self.rng.integers(len(actions)))])
            else:
                words = ["look", "go", "take", "open", "click", "search", "help", "[", "]", "1"]
                out.append(" ".join(self.rng.choice(words, size=int(self.rng.integers(1, 5)))))
        return out


class HumanPolicy:
    """A person types each action at the terminal."""

    def __init__(self, input_fn=input, print_fn=print):
        self.input_fn, self.print_fn = input_fn, print_fn

    def act(self, conversations: list[Conversation]) -> list[str]:
        out = []
        for conv in conversations:
            self.print_fn(conv.messages[-1]["content"] if conv.messages else "")
            actions = conv.info.get("admissible_actions")
            if actions:
                self.print_fn("Admissible: " + ", ".join(actions))
            out.append(self.input_fn("> "))
        return out
