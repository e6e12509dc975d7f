"""Building a run: the model (LoRA or full), the value head the estimator asks for, the
policies that sample with it, the optimizer, the task stream.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from turngym.trainers.advantages import ESTIMATORS, Estimator
from turngym.trainers.config import TrainConfig
from turngym.trainers.distributed import world
from turngym.trainers.state import RunState

#: outputs of the value head, (low / turn, high): a one-head estimator uses the first
VALUE_OUTPUTS = 2


@dataclass
class Trainer:
    """Everything a run holds; ``build_trainer`` makes it and ``loop.train`` drives it."""

    cfg: TrainConfig
    model: Any
    tokenizer: Any
    policy: Any  # HFPolicy sampling at the training temperature
    rollout_policy: Any  # what generates training rollouts: ``policy`` or a remote server
    eval_policy: Any  # HFPolicy on the same model, greedy by default
    value_head: torch.nn.Module | None
    modules: torch.nn.ModuleDict  # what a checkpoint stores (trainable parameters only)
    estimator: Estimator  # rl.estimator's declaration
    np_rng: np.random.Generator
    # the KL's reference: the trainable tensors as RL started (after SFT), by parameter name;
    # None without a KL (``loop.train`` takes it)
    reference: dict[str, torch.Tensor] | None = None
    state: RunState = field(default_factory=RunState)  # what a checkpoint stores of the loop
    log: Callable[[str], None] = print


def build_trainer(cfg: TrainConfig, log: Callable[[str], None] = print) -> Trainer:
    from turngym.agents.engine.frozen_layers import frozen_depth
    from turngym.agents.engine.memory import keep_freed_memory
    from turngym.agents.hf import HFPolicy
    from turngym.agents.models import load_model

    keep_freed_memory()  # the trainer owns its process: no page faults for each step's big tensors
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    estimator = ESTIMATORS[cfg.rl.estimator]
    model, tokenizer = load_model(cfg.model.name, device=cfg.model.device, dtype=cfg.model.dtype, seed=cfg.seed)
    if getattr(model, "peft_config", None):  # a trained run's model/ folder: its adapter becomes
        model = model.merge_and_unload()  # part of the weights this run starts from
    if cfg.model.lora:
        from peft import LoraConfig, get_peft_model

        depth = model.config.num_hidden_layers
        top = list(range(depth - cfg.model.lora_layers, depth)) if 0 < cfg.model.lora_layers < depth else None
        lora = LoraConfig(
            r=cfg.model.lora_rank,
            lora_alpha=cfg.model.lora_alpha,
            lora_dropout=cfg.model.lora_dropout,
            target_modules=list(cfg.model.lora_target_modules),
            layers_to_transform=top,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    value_head = None
    modules = torch.nn.ModuleDict({"policy": model})
    if estimator.value_heads:
        value_head = torch.nn.Linear(model.config.hidden_size, VALUE_OUTPUTS).to(next(model.parameters()).device)
        torch.nn.init.zeros_(value_head.weight)
        torch.nn.init.zeros_(value_head.bias)
        modules["value_head"] = value_head
    extra = {"": estimator.prompt_suffix} if estimator.prompt_suffix else {}  # "": every env
    prompt = dataclasses.replace(cfg.prompt, action_format=estimator.action_format, env_prompts=extra)
    gen = cfg.generation
    policy = HFPolicy(
        model,
        tokenizer,
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_new_tokens=gen.max_new_tokens,
        prompt=prompt,
        batch_size=cfg.env.num_envs,
    )
    eval_policy = HFPolicy(
        model,
        tokenizer,
        temperature=gen.eval_temperature,
        max_new_tokens=gen.max_new_tokens,
        prompt=prompt,
        batch_size=cfg.env.num_envs,
    )
    rollout_policy = policy
    if cfg.rl.max_lag == 0:  # the rollouts keep the frozen layers' output for the update (not
        # asynchronous ones: the update would drop the states the next batch's rollouts keep meanwhile)
        policy.keep_states = frozen_depth(model)
    if gen.server_url:
        from turngym.agents.openai_policy import OpenAIPolicy

        rollout_policy = OpenAIPolicy(
            gen.server_url,
            gen.server_model,
            temperature=gen.temperature,
            top_p=gen.top_p,
            max_tokens=gen.max_new_tokens,
            prompt=prompt,
            seed=cfg.seed,
            token_ids=gen.server_token_ids,
            logprobs=gen.server_token_ids,
        )
    return Trainer(
        cfg=cfg,
        model=model,
        tokenizer=tokenizer,
        policy=policy,
        rollout_policy=rollout_policy,
        eval_policy=eval_policy,
        value_head=value_head,
        modules=modules,
        estimator=estimator,
        np_rng=np.random.default_rng(cfg.seed),
        log=log,
    )


def make_optimizer(tr: Trainer, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    params = [p for p in tr.modules.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def run_task_ids(cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """The task ids of ``env.train_split`` and ``env.eval_split`` (a ValueError naming the field
    and the splits the env has when one holds no task)."""
    import turngym
    from turngym.core.splits import split_task_ids

    env = turngym.make(cfg.env.id, **cfg.env.kwargs)
    try:
        train, held_out = (
            list(split_task_ids(env, getattr(cfg.env, field), f"env.{field}", cfg.env.id))
            for field in ("train_split", "eval_split")
        )
    finally:
        env.close()
    return train, held_out


def next_tasks(tr: Trainer, all_ids: list[str], n: int) -> list[str]:
    """The next ``n`` tasks of a shuffled pass over the split (reshuffled each pass)."""
    out = []
    while len(out) < n:
        state = tr.state
        if not state.task_order or state.task_cursor >= len(state.task_order):
            state.task_order = [all_ids[i] for i in tr.np_rng.permutation(len(all_ids))]
            state.task_cursor = 0
        out.append(state.task_order[state.task_cursor])
        state.task_cursor += 1
    return out


def progress(tr: Trainer, total: int, desc: str, initial: int = 0):
    """A tqdm bar (shown on rank 0 when ``progress`` is on)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        disable=not tr.cfg.progress or world()[0] != 0,
        dynamic_ncols=True,
        leave=False,
    )
