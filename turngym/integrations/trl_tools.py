"""turngym envs through TRL's ``environment_factory``: ``environment_class(env_id)`` builds a class with
one method per tool of the env (typed, with a docstring TRL turns into a JSON schema),
``reset(**row)`` and ``get_reward()``. TRL then runs the tool loop itself; it needs a chat template
that renders tool calls."""

from __future__ import annotations

import inspect
import json
from typing import Any

import turngym

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def environment_class(env_id: str, env_kwargs: dict[str, Any] | None = None, name: str | None = None) -> type:
    """A class for TRL's ``environment_factory``: the env's tools as typed, documented methods.

    ``reset(**row)`` starts an episode (``row["task_id"]`` and ``row["seed"]`` when the dataset
    has them) and returns the instructions and first observation; each tool method is one
    ``env.step``; ``get_reward()`` is the episode's return so far. A text env without tools is
    served through its tools-mode twin (``...-tools-vN``).
    """
    from turngym.tools.registration import tools_id

    probe = turngym.make(env_id, **(env_kwargs or {}))
    specs = probe.unwrapped.tools()
    probe.close()
    if not specs:
        env_id = tools_id(env_id)
        probe = turngym.make(env_id, **(env_kwargs or {}))
        specs = probe.unwrapped.tools()
        probe.close()
        if not specs:
            raise ValueError(f"env: {env_id!r} declares no tools")
    reserved = {"reset", "get_reward", "close"}
    clash = [s["function"]["name"] for s in specs if s["function"]["name"] in reserved]
    if clash:
        raise ValueError(f"env {env_id!r} has tools named {clash}, reserved by the environment_factory class")

    def __init__(self):
        self.env = turngym.make(env_id, **(env_kwargs or {}))
        self.total, self.done, self.info = 0.0, False, {}

    def reset(self, **row) -> str:
        options = {"task_id": str(row["task_id"])} if row.get("task_id") else None
        obs, self.info = self.env.reset(seed=row.get("seed"), options=options)
        self.total, self.done = 0.0, False
        return f"{self.env.unwrapped.instructions()}\n\n{obs}".strip()

    def get_reward(self) -> float:
        return self.total

    def close(self) -> None:
        self.env.close()

    methods = {
        "__init__": __init__,
        "reset": reset,
        "get_reward": get_reward,
        "_close": close,
        "__doc__": f"The {env_id} environment: call its tools to act.",
        "env_id": env_id,
    }
    for spec in specs:
        methods[spec["function"]["name"]] = _tool_method(spec["function"])
    class_name = name or "".join(ch for ch in env_id.split("/")[-1].title() if ch.isalnum()) + "Environment"
    return type(class_name, (), methods)


def _tool_method(function: dict[str, Any]):
    """A method with the tool's name, typed signature and Google-style docstring; calling it steps the env."""
    name = function["name"]
    schema = function.get("parameters") or {}
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    for arg in sorted(properties, key=lambda a: a not in required):  # required ones first
        kind = _JSON_TYPES.get(properties[arg].get("type"), str)
        annotations[arg] = kind if arg in required else kind | None
        params.append(
            inspect.Parameter(
                arg,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=annotations[arg],
                default=inspect.Parameter.empty if arg in required else None,
            )
        )

    def method(self, *args, **kwargs) -> str:
        bound = method.__signature__.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self" and v is not None}
        if self.done:
            return "The episode is over."
        obs, reward, terminated, truncated, self.info = self.env.step(
            json.dumps({"name": name, "arguments": arguments})
        )
        self.total += reward
        self.done = terminated or truncated
        return obs

    lines = [function.get("description") or f"Call the {name} tool."]
    if properties:
        lines += ["", "Args:"]
        lines += [f"    {arg}: {properties[arg].get('description') or arg}" for arg in properties]
    lines += ["", "Returns:", "    The environment's observation after the call."]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__signature__ = inspect.Signature(params, return_annotation=str)
    method.__annotations__ = annotations
    return method
