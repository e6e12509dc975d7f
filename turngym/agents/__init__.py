"""Policies: experts, random, people, local transformers models, OpenAI-compatible servers."""

from turngym.agents.basic import ExpertPolicy, HumanPolicy, RandomPolicy

__all__ = ["ExpertPolicy", "HumanPolicy", "RandomPolicy"]
