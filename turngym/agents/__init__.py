"""Policies: experts, random, people, local transformers models, OpenAI-compatible servers.

The model-backed names import torch / openai on first use, so ``import turngym.agents`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from turngym.agents.basic import ExpertPolicy, HumanPolicy, RandomPolicy
from turngym.agents.loading import load_policy

_LAZY = {
    "HFPolicy": "turngym.agents.hf",
    "Generation": "turngym.agents.hf",
    "OpenAIPolicy": "turngym.agents.openai_policy",
    "OpenAIPolicyError": "turngym.agents.openai_policy",
    "PromptConfig": "turngym.agents.prompts",
    "build_messages": "turngym.agents.prompts",
    "load_model": "turngym.agents.models",
    "save_model": "turngym.agents.models",
    "score_completions": "turngym.agents.engine.scoring",
    "TokenScores": "turngym.agents.engine.scoring",
}

__all__ = ["ExpertPolicy", "HumanPolicy", "RandomPolicy", "load_policy", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'turngym.agents' has no attribute {name!r}")
