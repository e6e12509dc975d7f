"""turngym envs in TRL's ``GRPOTrainer`` (TRL 1.16): a multi-turn ``rollout_func`` and per-turn
advantages from turngym's estimators.

``GRPORollout(env_id)`` is a ``rollout_func``. TRL hands it the prompts of a batch (each task id
repeated ``num_generations`` times, consecutively); it plays each group's episodes on an
``EnvPool`` with an ``HFPolicy`` on ``trainer.model`` (identical starts within a group, also when
TRL splits a group across processes) and flattens every episode into one completion:

    prompt_ids      = the first turn's prompt, token for token
    completion_ids  = reply 1, env text 2, reply 2, env text 3, ... (the ids the model was fed),
                      then one end-of-sequence token when the whole episode fits
    env_mask        = 1 on the model's own tokens, 0 on env tokens (TRL leaves those out of the loss)
    logprobs        = the sampling log-prob of each model token (0.0 on env tokens)

Nothing is re-tokenized: HFPolicy builds turn t+1's prompt as turn t's prompt + its reply ids +
the new env text, so the concatenation is exactly what the model saw. The closing EOS (an env
token, never trained) tells TRL the episode was not cut: TRL counts a completion that does not
end in EOS as truncated (``completions/clipped_ratio``) and ``mask_truncated_completions`` drops
it. An episode longer than ``max_completion_length`` is cut there, with a warning, and stays
"truncated" to TRL. The episode's return goes to the reward functions as the column
``env_reward`` (``env_reward_func`` reads it); an unscorable episode (env crash) gets ``None``,
which TRL leaves out.

``TurnGRPOTrainer`` (a ``GRPOTrainer``) replaces TRL's one advantage per completion by a
turngym estimator's advantage per turn (GiGPO, HGPO, RLOO, GRPO, graph: any without a value
head), laid over that turn's own tokens. Under ``accelerate`` it gathers every process's
episodes first, so a group split across processes is estimated whole.

``cpu_grpo_options(output_dir, **overrides)`` is the ``GRPOConfig`` of turngym's small CPU runs
(its tests, examples and the throughput benchmark). TRL's ``environment_factory`` is served by
``turngym.integrations.trl_tools.environment_class``.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np

import turngym

#: the GRPOConfig settings every small CPU run of turngym shares: no GPU and no bfloat16, no KL term,
#: a log row every step, nothing saved or reported, a fixed seed, no progress bar
CPU_GRPO_OPTIONS: dict[str, Any] = {
    "use_cpu": True,
    "beta": 0.0,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "bf16": False,
    "seed": 0,
    "disable_tqdm": True,
}


def cpu_grpo_options(output_dir: str, **overrides: Any) -> dict[str, Any]:
    """Keyword arguments for ``trl.GRPOConfig``: ``CPU_GRPO_OPTIONS`` in ``output_dir``, with
    ``overrides`` (batch size, generations, lengths, learning rate, steps) on top. A plain dict, so
    that a script in a venv without turngym can be handed it as JSON."""
    return {"output_dir": output_dir, **CPU_GRPO_OPTIONS, **overrides}


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
        num_envs, backend, env_kwargs, servers, server_token: the ``EnvPool`` (``backend="remote"``
            with ``servers`` runs the envs on ``turngym serve-env`` machines; ``server_token`` is
            their ``--token``).
        max_turns: the longest episode.
        max_new_tokens: the longest reply in one turn. The flattened episode is cut at the
            trainer's ``max_completion_length``: size that for whole episodes (about
            ``max_turns * (max_new_tokens + the env's text per turn)``); a cut warns.
        temperature: sampling temperature (default: the trainer's ``args.temperature``).
        prompt: a ``turngym.agents.prompts.PromptConfig`` for HFPolicy (default: the
            ``transcript`` history, whose episodes flatten into one sequence without a cut).
        seed: group ``g`` (counted over the whole batch, all processes) of call ``c`` resets
            with the seed ``seed + 100_003 * c + g``.

    After each call, ``last_trajectories`` holds this process's episodes and ``last_token_steps``
    for each one the step each completion token belongs to (-1 on env tokens), in TRL's order.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 4,
        backend: str = "thread",
        env_kwargs: dict[str, Any] | None = None,
        servers: list[str] | None = None,
        server_token: str | None = None,
        max_turns: int = 8,
        max_new_tokens: int = 64,
        temperature: float | None = None,
        prompt=None,
        seed: int = 0,
    ):
        turngym.spec(env_id)  # an unknown id fails here, not in the middle of training
        self.env_id, self.max_turns, self.max_new_tokens = env_id, int(max_turns), int(max_new_tokens)
        self.pool_args = {
            "num_envs": num_envs,
            "backend": backend,
            "env_kwargs": env_kwargs,
            "servers": servers,
            "server_token": server_token,
        }
        if prompt is None:
            from turngym.agents.prompts import PromptConfig

            prompt = PromptConfig(history="transcript")
        self.temperature, self.prompt, self.seed = temperature, prompt, int(seed)
        self.calls = itertools.count()
        self.pool = None
        self.policy = None
        self.last_trajectories: list = []
        self.last_token_steps: list[list[int]] = []

    def _policy(self, trainer):
        from turngym.agents.hf import HFPolicy

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy is None or self.policy.model is not model:
            temperature = self.temperature if self.temperature is not None else trainer.args.temperature
            self.policy = HFPolicy(
                model,
                trainer.processing_class,
                temperature=temperature,
                top_p=getattr(trainer.args, "top_p", 1.0) or 1.0,
                max_new_tokens=self.max_new_tokens,
                prompt=self.prompt,
            )
        return self.policy

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        group = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        rank = getattr(trainer.accelerator, "process_index", 0)
        world = getattr(trainer.accelerator, "num_processes", 1)
        tasks = [_task_id(p) for p in prompts]
        if (len(tasks) * world) % group:
            raise ValueError(
                f"rollout_func got {len(tasks)} prompts on each of {world} processes, "
                f"not a multiple of num_generations={group}"
            )
        # TRL gives process p the p-th contiguous slice of the batch, so a group may straddle two
        # processes; number groups over the whole batch so both halves reset with one seed
        first = rank * len(tasks)
        groups: list[tuple[int, str, int]] = []  # (global group index, task id, members here)
        for i, task in enumerate(tasks):
            g = (first + i) // group
            if groups and groups[-1][0] == g:
                if task != groups[-1][1]:
                    raise ValueError(
                        f"rollout_func: each group of num_generations={group} prompts must repeat "
                        f"one task id, got {groups[-1][1]!r} and {task!r}"
                    )
                groups[-1] = (g, task, groups[-1][2] + 1)
            else:
                groups.append((g, task, 1))
        if self.pool is None:
            if self.pool_args["backend"] == "remote":
                from turngym.integrations import remote_pool  # noqa: F401  (registers the "remote" backend)
            self.pool = turngym.EnvPool(self.env_id, **self.pool_args)
        base = self.seed + 100_003 * next(self.calls)
        policy = self._policy(trainer)
        trajectories = []
        # one pool call per run of groups with as many members here (one run unless a group is split)
        for _, run in itertools.groupby(groups, key=lambda x: x[2]):
            run = list(run)
            trajectories += self.pool.rollout(
                policy,
                [task for _, task, _ in run],
                group_size=run[0][2],
                seed=base + run[0][0],
                max_turns=self.max_turns,
            )
        limit = getattr(trainer.args, "max_completion_length", None)
        ends = _end_tokens(trainer)
        out: dict[str, list] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "env_reward": [],
            "env_success": [],
            "env_turns": [],
        }
        self.last_trajectories, self.last_token_steps = trajectories, []
        longest, cut = 0, 0
        for traj in trajectories:
            prompt_ids, completion_ids, logprobs, mask, steps = episode_tokens(traj, limit, ends)
            longest = max(longest, traj.metadata.get("flattened_tokens", 0))
            cut += "flatten_cut_at_token" in traj.metadata
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out["env_reward"].append(traj.episode_return if traj.scorable else None)
            out["env_success"].append(bool(traj.success))
            out["env_turns"].append(traj.length)
            self.last_token_steps.append(steps)
        if cut:
            warnings.warn(
                f"GRPORollout: {cut} of {len(trajectories)} episodes were cut at max_completion_length="
                f"{limit} (the longest flattens to {longest} tokens); the turns past the cut are not "
                "trained although the reward covers them. Raise max_completion_length.",
                stacklevel=2,
            )
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def _end_tokens(trainer) -> list[int]:
    """The ids TRL takes as "not truncated" at a completion's end: its EOS ids, then the pad id."""
    tokenizer = getattr(trainer, "processing_class", None)
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps its tokenizer
    ids = list(getattr(trainer, "eos_token_ids", None) or [getattr(tokenizer, "eos_token_id", None)])
    ids.append(getattr(tokenizer, "pad_token_id", None))
    return [i for i in ids if i is not None]


def _task_id(prompt: Any) -> str:
    """A prompt is a task id, or a chat whose last message's content is one."""
    if isinstance(prompt, list):
        prompt = prompt[-1]["content"] if prompt else ""
    return str(prompt).strip()


def flatten_episode(traj, limit: int | None = None) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt_ids, completion_ids, logprobs, env_mask) of one episode as one completion
    (``episode_tokens`` without the closing EOS and the token-to-step map)."""
    return episode_tokens(traj, limit)[:4]


def episode_tokens(traj, limit: int | None = None, end_ids: list[int] | None = None):
    """(prompt_ids, completion_ids, logprobs, env_mask, token_steps) of one episode as one completion.

    ``token_steps[k]`` is the index in ``traj.steps`` of the turn whose reply holds completion
    token k, or -1 on env tokens. Turn t+1's prompt must start with turn t's prompt + reply
    (HFPolicy's ``transcript`` history does this). Where it does not (any other history drops
    something: old turns, or the admissible actions under older observations), the episode is cut
    before that turn (``metadata["flatten_cut_at_turn"]``): training on tokens the model never saw
    in that order would be wrong. A completion longer than ``limit`` is cut to it
    (``metadata["flatten_cut_at_token"]``). ``end_ids`` (TRL's EOS ids, then pad): when the whole
    episode fits and does not already end in one of them, ``end_ids[0]`` is appended as an env
    token, so TRL does not count the episode as truncated.
    """
    indexed = [(k, s) for k, s in enumerate(traj.steps) if s.completion_ids or s.prompt_ids]
    if not indexed:
        raise ValueError(f"trajectory {traj.trajectory_id}: no token ids; the policy must record them (HFPolicy)")
    k0, first = indexed[0]
    prompt_ids = list(first.prompt_ids)
    completion = list(first.completion_ids)
    logprobs = list(first.logprobs) or [0.0] * len(completion)
    mask = [1] * len(completion)
    steps = [k0] * len(completion)
    seen = prompt_ids + completion
    whole = True
    for k, step in indexed[1:]:
        if step.prompt_ids[: len(seen)] != seen:
            traj.metadata["flatten_cut_at_turn"] = step.turn
            whole = False
            break
        env_tokens = step.prompt_ids[len(seen) :]
        completion += env_tokens + list(step.completion_ids)
        logprobs += [0.0] * len(env_tokens) + (list(step.logprobs) or [0.0] * len(step.completion_ids))
        mask += [0] * len(env_tokens) + [1] * len(step.completion_ids)
        steps += [-1] * len(env_tokens) + [k] * len(step.completion_ids)
        seen = list(step.prompt_ids) + list(step.completion_ids)
    if end_ids and whole and (not completion or completion[-1] not in end_ids):
        completion, logprobs, mask, steps = (
            completion + [end_ids[0]],
            logprobs + [0.0],
            mask + [0],
            steps + [-1],
        )
    traj.metadata["flattened_tokens"] = len(completion)
    if limit is not None and len(completion) > limit:
        traj.metadata["flatten_cut_at_token"] = limit
        completion, logprobs, mask, steps = completion[:limit], logprobs[:limit], mask[:limit], steps[:limit]
    return prompt_ids, completion, logprobs, mask, steps


# ----- per-turn advantages ----------------------------------------------------------------------------
#: the TRL versions whose GRPOTrainer internals TurnGRPOTrainer was written and tested against
TRL_TESTED = ">=1.16,<1.17"
#: TRL loss types that weigh each token by its own advantage (vespo and the off-policy mask read one
#: sign per sequence)
TOKEN_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo")


def check_trl_version(version: str | None = None) -> None:
    """Raise unless TRL is a version ``TurnGRPOTrainer``'s one override was checked against."""
    from packaging.specifiers import SpecifierSet

    if version is None:
        import trl

        version = trl.__version__
    if version not in SpecifierSet(TRL_TESTED, prereleases=True):
        raise ImportError(
            f"TurnGRPOTrainer: trl {version} is untested (it overrides a private GRPOTrainer "
            f"method and needs trl{TRL_TESTED}); install that range: pip install 'trl{TRL_TESTED}'"
        )


def token_advantages(steps: list[list[int]], per_step: list, width: int):
    """A (completions, width) float tensor: token k of completion i gets ``per_step[i][steps[i][k]]``,
    env tokens (step -1) and padding 0."""
    import torch

    out = torch.zeros(len(steps), width, dtype=torch.float32)
    for i, (row, values) in enumerate(zip(steps, per_step)):
        idx = torch.tensor(row, dtype=torch.long)
        own = idx >= 0
        if own.any():
            table = torch.as_tensor(values, dtype=torch.float32)
            out[i, : len(row)][own] = table[idx[own]]
    return out


def _turn_trainer_class():
    from accelerate.utils import gather_object
    from trl import GRPOTrainer

    from turngym.integrations.batch import columns, turn_advantages
    from turngym.integrations.batch import estimator as value_free

    class TurnGRPOTrainer(GRPOTrainer):
        """TRL's GRPOTrainer, trained on a turngym estimator's advantage per turn.

        Pass a ``GRPORollout`` as ``rollout_func``, plus ``estimator`` (a value-free name:
        gigpo, hgpo, rloo, grpo, graph) and its ``estimator_args``. Each completion (a
        flattened episode) gets a (tokens,) row of advantages: turn t's reply tokens carry
        A_t, env tokens 0 (they are out of the loss anyway). The estimator sees the env's
        per-turn rewards; TRL's ``reward_funcs`` still run and are logged, but no longer set the
        advantages. The episodes of every process are gathered first (``gather_object``), so
        each group is estimated whole, and every process keeps the rows of its own completions.

        The one TRL override is ``_generate_and_score_completions`` (private): it calls TRL's
        and swaps the (B,) ``advantages`` for (B, T) ones, which TRL 1.16's loss takes as they
        are. ``check_trl_version`` refuses TRL versions outside ``TRL_TESTED``.
        ``last_turn_advantages`` keeps this process's per-step advantages of the last batch, and
        ``last_token_advantages`` the (completions, tokens) tensor it handed TRL for them.
        """

        def __init__(self, *args, estimator: str = "gigpo", estimator_args: dict[str, Any] | None = None, **kwargs):
            check_trl_version()
            self.turn_estimator = value_free(estimator)
            self.estimator_args = dict(estimator_args or {})
            unknown = sorted(set(self.estimator_args) - set(self.turn_estimator.options))
            if unknown:
                raise ValueError(
                    f"estimator_args.{unknown[0]}: not an option of {self.turn_estimator.name}; "
                    f"its options: {list(self.turn_estimator.options)}"
                )
            super().__init__(*args, **kwargs)
            if not isinstance(self.rollout_func, GRPORollout):
                raise ValueError(
                    "rollout_func: TurnGRPOTrainer needs a turngym GRPORollout (the per-turn "
                    "advantages come from its episodes)"
                )
            if self.loss_type not in TOKEN_LOSSES:
                raise ValueError(
                    f"loss_type: {self.loss_type!r} reads one advantage per sequence; "
                    f"TurnGRPOTrainer takes one of {list(TOKEN_LOSSES)}"
                )
            self.last_turn_advantages: list = []
            self.last_token_advantages = None

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            rollout = self.rollout_func
            local = rollout.last_trajectories
            if output["advantages"].shape != (len(local),):
                raise RuntimeError(
                    f"TurnGRPOTrainer: TRL returned advantages of shape "
                    f"{tuple(output['advantages'].shape)} for {len(local)} episodes; "
                    f"this TRL is not one it supports ({TRL_TESTED})"
                )
            rank = self.accelerator.process_index
            mine = columns(local)
            mine["episode"] = [(rank, e) for e in mine["episode"]]
            everyone = gather_object([mine])  # one dict per process, in rank order
            merged = {k: [v for part in everyone for v in part[k]] for k in mine}
            values = turn_advantages(self.turn_estimator, **merged, **self.estimator_args)
            here = np.asarray([e[0] == rank for e in merged["episode"]])
            per_step = np.split(values[here], np.cumsum([t.length for t in local])[:-1])
            self.last_turn_advantages = per_step
            advantages = token_advantages(rollout.last_token_steps, per_step, output["completion_ids"].shape[1])
            self.last_token_advantages = advantages
            output["advantages"] = advantages.to(output["advantages"].device)
            mode = "train" if self.model.training else "eval"
            flat = np.asarray(values[np.asarray(merged["scorable"], dtype=bool)])
            self._metrics[mode]["turn_advantages/std"].append(float(flat.std()) if len(flat) else 0.0)
            return output

    return TurnGRPOTrainer


def __getattr__(name: str):
    # built on first use, so that importing this module never needs TRL
    if name == "TurnGRPOTrainer":
        cls = _turn_trainer_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
