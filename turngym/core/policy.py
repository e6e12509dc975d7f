"""The policy protocol the rollout machinery speaks.

``Policy.act(conversations) -> completions``, batched. A ``Conversation`` is one episode's
chat so far (OpenAI message shape) plus the env's latest StepInfo, so a policy can use
``admissible_actions`` or ``tools``. A policy whose ``env_side`` is true (experts) is instead
asked ``act_in_env(env)`` inside the worker that owns the env, because it reads the true state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Conversation:
    messages: list[dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)
    env_id: str = ""


@dataclass
class Completion:
    text: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    finish_reason: str = "stop"
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI-shaped, when the server parsed them


@runtime_checkable
class Policy(Protocol):
    def act(self, conversations: list[Conversation]) -> list[Completion | str]: ...


def as_completion(out: Completion | str) -> Completion:
    return out if isinstance(out, Completion) else Completion(text=str(out))


def completion_action(completion: Completion | str) -> str:
    """The env action for a completion: its text, or, when a server already parsed tool calls
    (``Completion.tool_calls``), those calls as OpenAI JSON (which the tool-call parsers read)."""
    calls = getattr(completion, "tool_calls", None)
    if calls:
        return json.dumps({"tool_calls": calls}, ensure_ascii=False)
    return completion if isinstance(completion, str) else completion.text
