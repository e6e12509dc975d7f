"""turngym envs in TRL's ``GRPOTrainer`` (TRL 1.16): a multi-turn ``rollout_func`` and an ``environment_factory``.

``GRPORollout(env_id)`` is a ``rollout_func``. TRL hands it the prompts of a batch (each task id
repeated ``num_generations`` times, consecutively); it plays each group's episodes on an
``EnvPool`` with an ``HFPolicy`` on ``trainer.model`` (identical starts within a group) and
flattens every episode into one completion:

    prompt_ids      = the first turn's prompt, token for token
    completion_ids  = reply 1, env text 2, reply 2, env text 3, ... (the ids the model was fed)
    env_mask        = 1 on the model's own tokens, 0 on env tokens (TRL leaves those out of the loss)
    logprobs        = the sampling log-prob of each model token (0.0 on env tokens)

Nothing is re-tokenized: HFPolicy builds turn t+1's prompt as turn t's prompt + its reply ids +
the new env text, so the concatenation is exactly what the model saw. The episode's return goes
to the reward functions as the column ``env_reward`` (``env_reward_func`` reads it); an
unscorable episode (env crash) gets ``None``, which TRL leaves out.

What is lost: TRL gives one advantage per completion, so every turn of an episode shares the
episode's advantage. Step-level credit (GiGPO, turn-level GAE, ...) needs turngym's own trainer.

``environment_class(env_id)`` builds the class TRL's ``environment_factory`` wants: one method
per tool of the env (typed, with a docstring TRL turns into a JSON schema), ``reset(**row)``
and ``get_reward()``. TRL then runs the tool loop itself; it needs a chat template that renders
tool calls.
"""

from __future__ import annotations

import inspect
import itertools
import json
from typing import Any

import turngym

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


# ----- rollout_func -----------------------------------------------------------------------------------
def task_dataset(env_id: str, split: str | None = None, limit: int | None = None):
    """A ``datasets.Dataset`` whose ``prompt`` column is task ids of ``split``, for ``GRPORollout``."""
    from datasets import Dataset

    env = turngym.make(env_id)
    try:
        ids = env.task_ids(split or env.split)
    finally:
        env.close()
    if not ids:
        raise ValueError(f"split: {split!r} has no tasks for {env_id}")
    return Dataset.from_dict({"prompt": ids[:limit] if limit else ids})


def env_reward_func(completions, env_reward, **kwargs) -> list[float | None]:
    """The reward function to pass with ``GRPORollout``: the episode's return (None: unscorable)."""
    return list(env_reward)


class GRPORollout:
    """A TRL ``rollout_func`` that plays multi-turn turngym episodes.

    Args:
        env_id: a registered env id; the dataset's prompts are its task ids.
        num_envs, backend, env_kwargs, servers: the ``EnvPool`` (``backend="remote"`` with
            ``servers`` runs the envs on ``turngym serve-env`` machines).
        max_turns: the longest episode.
        max_new_tokens: the longest reply in one turn. The flattened episode is cut at the
            trainer's ``max_completion_length``.
        temperature: sampling temperature (default: the trainer's ``args.temperature``).
        prompt: a ``turngym.agents.prompts.PromptConfig`` for HFPolicy (default: the
            ``transcript`` history, whose episodes flatten into one sequence without a cut).
        seed: group ``k`` of call ``c`` resets with a seed derived from (seed, c, k).
    """

    def __init__(self, env_id: str, num_envs: int = 4, backend: str = "thread",
                 env_kwargs: dict[str, Any] | None = None, servers: list[str] | None = None,
                 max_turns: int = 8, max_new_tokens: int = 64, temperature: float | None = None,
                 prompt=None, seed: int = 0):
        turngym.spec(env_id)  # an unknown id fails here, not in the middle of training
        self.env_id, self.max_turns, self.max_new_tokens = env_id, int(max_turns), int(max_new_tokens)
        self.pool_args = {"num_envs": num_envs, "backend": backend, "env_kwargs": env_kwargs, "servers": servers}
        if prompt is None:
            from turngym.agents.prompts import PromptConfig

            prompt = PromptConfig(history="transcript")
        self.temperature, self.prompt, self.seed = temperature, prompt, int(seed)
        self.calls = itertools.count()
        self.pool = None
        self.policy = None
        self.last_trajectories: list = []

    def _policy(self, trainer):
        from turngym.agents.hf import HFPolicy

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy is None or self.policy.model is not model:
            temperature = self.temperature if self.temperature is not None else trainer.args.temperature
            self.policy = HFPolicy(model, trainer.processing_class, temperature=temperature,
                                   top_p=getattr(trainer.args, "top_p", 1.0) or 1.0,
                                   max_new_tokens=self.max_new_tokens, prompt=self.prompt)
        return self.policy

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        group = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        tasks = [_task_id(p) for p in prompts]
        if len(tasks) % group:
            raise ValueError(f"rollout_func got {len(tasks)} prompts, not a multiple of num_generations={group}")
        heads = tasks[::group]
        if any(tasks[i] != heads[i // group] for i in range(len(tasks))):
            raise ValueError("rollout_func: each group of num_generations prompts must repeat one task id")
        if self.pool is None:
            self.pool = turngym.EnvPool(self.env_id, **self.pool_args)
        seed = self.seed + 100_003 * next(self.calls)
        trajectories = self.pool.rollout(self._policy(trainer), heads, group_size=group, seed=seed,
                                         max_steps=self.max_turns)
        self.last_trajectories = trajectories
        limit = getattr(trainer.args, "max_completion_length", None)
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                "env_reward": [], "env_success": [], "env_turns": []}
        for traj in trajectories:
            prompt_ids, completion_ids, logprobs, mask = flatten_episode(traj, limit)
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out["env_reward"].append(traj.episode_return if traj.scorable else None)
            out["env_success"].append(bool(traj.success))
            out["env_turns"].append(traj.length)
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def _task_id(prompt: Any) -> str:
    """A prompt is a task id, or a chat whose last message's content is one."""
    if isinstance(prompt, list):
        prompt = prompt[-1]["content"] if prompt else ""
    return str(prompt).strip()


def flatten_episode(traj, limit: int | None = None) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt_ids, completion_ids, logprobs, env_mask) of one episode as one completion.

    Turn t+1's prompt must start with turn t's prompt + reply (HFPolicy's ``transcript``
    history does this). Where it does not (any other history drops something: old turns, or
    the admissible actions under older observations), the episode is cut before that turn:
    training on tokens the model never saw in that order would be wrong.
    """
    steps = [s for s in traj.steps if s.completion_ids or s.prompt_ids]
    if not steps:
        raise ValueError(f"trajectory {traj.trajectory_id}: no token ids; the policy must record them (HFPolicy)")
    prompt_ids = list(steps[0].prompt_ids)
    completion = list(steps[0].completion_ids)
    logprobs = list(steps[0].logprobs) or [0.0] * len(completion)
    mask = [1] * len(completion)
    seen = prompt_ids + completion
    for step in steps[1:]:
        if step.prompt_ids[:len(seen)] != seen:
            traj.metadata["flatten_cut_at_turn"] = step.turn
            break
        env_tokens = step.prompt_ids[len(seen):]
        completion += env_tokens + list(step.completion_ids)
        logprobs += [0.0] * len(env_tokens) + (list(step.logprobs) or [0.0] * len(step.completion_ids))
        mask += [0] * len(env_tokens) + [1] * len(step.completion_ids)
        seen = list(step.prompt_ids) + list(step.completion_ids)
    if limit is not None and len(completion) > limit:
        completion, logprobs, mask = completion[:limit], logprobs[:limit], mask[:limit]
    return prompt_ids, completion, logprobs, mask


# ----- environment_factory ---------------------------------------------------------------------------
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

    methods = {"__init__": __init__, "reset": reset, "get_reward": get_reward, "_close": close,
               "__doc__": f"The {env_id} environment: call its tools to act.", "env_id": env_id}
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
        params.append(inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotations[arg],
                                        default=inspect.Parameter.empty if arg in required else None))

    def method(self, *args, **kwargs) -> str:
        bound = method.__signature__.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self" and v is not None}
        if self.done:
            return "The episode is over."
        obs, reward, terminated, truncated, self.info = self.env.step(json.dumps({"name": name, "arguments": arguments}))
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
