"""Build a policy from a command-line spec such as ``expert``, ``random``, ``hf:PATH``."""

from __future__ import annotations

from typing import Any

from turngym.agents.basic import ExpertPolicy, HumanPolicy, RandomPolicy

POLICY_KINDS = ("expert", "random", "human", "hf:NAME_OR_PATH", "openai:URL")


def load_policy(spec: str, **options: Any):
    kind, _, arg = spec.partition(":")
    if kind == "expert":
        return ExpertPolicy()
    if kind == "random":
        return RandomPolicy(seed=int(options.get("seed", 0)))
    if kind == "human":
        return HumanPolicy()
    raise ValueError(f"--policy: unknown {spec!r}; allowed: {', '.join(POLICY_KINDS)}")
