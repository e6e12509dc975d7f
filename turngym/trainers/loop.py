"""The training loop: (optional SFT) -> [collect groups -> advantages -> update -> evaluate]*.

    from turngym.trainers import load_config, train
    train(load_config("examples/train.yaml", overrides=["rl.updates=20"]))

One update:
1. take ``tasks_per_update`` tasks from the shuffled train split, run ``group_size`` rollouts of
   each with identical starts (EnvPool);
2. compute step advantages with the configured estimator (a pure function of the batch),
   optionally reshaped by EMPG, and write them into the records (``Step.advantage``);
3. optimise the token-level clipped policy gradient over the agent's completion tokens (plus KL
   to the reference and the value-head loss when configured), in minibatches with gradient
   accumulation over micro-batches;
4. log metrics, write the rollouts, evaluate on the held-out split every ``eval.every`` updates,
   save a checkpoint.

Everything random draws from streams saved in the checkpoint, so a killed run resumed from its
last checkpoint continues exactly as if it had never stopped.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from turngym.core.records import Trajectory, write_jsonl
from turngym.trainers import checkpoint as ckpt
from turngym.trainers.advantages import CRITIC_ESTIMATORS, ESTIMATORS, empg
from turngym.trainers.config import TrainConfig, dump_yaml
from turngym.trainers.losses import clipped_policy_loss, kl_to_reference, sft_loss, value_loss
from turngym.trainers.metrics import MetricsWriter, plot_curves, read_metrics
from turngym.trainers.rollout import attach_tokens, collect, sft_examples, token_offsets
from turngym.trainers.spans import token_span_mask

HIPER_FORMAT = ("Plan with subgoals. Each turn write <switch>SWITCH</switch> to start a new subgoal or "
                "<switch>KEEP</switch> to continue the current one, then <subgoal>the subgoal</subgoal>, then the "
                "action.")


@dataclass
class Sample:
    """One agent turn ready for the loss."""

    prompt_ids: list[int]
    completion_ids: list[int]
    old_logprobs: list[float]
    advantages: list[float]          # per completion token
    loss_mask: list[int] = field(default_factory=list)  # 1 on tokens the loss may use (Step.loss_mask)
    value_targets: tuple[float, float] = (0.0, 0.0)  # (low / turn, high) value head targets
    value_weights: tuple[float, float] = (0.0, 0.0)


@dataclass
class Trainer:
    """Everything a run holds; ``train`` builds it and ``run`` drives it."""

    cfg: TrainConfig
    model: Any
    tokenizer: Any
    policy: Any                  # HFPolicy sampling at the training temperature
    rollout_policy: Any          # what generates training rollouts: ``policy`` or a remote server
    eval_policy: Any             # HFPolicy on the same model, greedy by default
    value_head: torch.nn.Module | None
    modules: torch.nn.ModuleDict  # what a checkpoint stores (trainable parameters only)
    np_rng: np.random.Generator
    state: dict[str, Any] = field(default_factory=dict)
    log: Callable[[str], None] = print


# ----- several processes (torchrun / accelerate launch) ----------------------------------------

def world() -> tuple[int, int]:
    """(rank, number of processes): (0, 1) unless launched by torchrun or `accelerate launch`."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(cfg: TrainConfig) -> None:
    """Join the process group a launcher described in the environment (WORLD_SIZE, RANK, ...).

    Data parallel: every process holds the whole model, collects its own share of the update's
    groups, and gradients are averaged across processes before each optimizer step, so the
    copies stay identical. Only rank 0 evaluates and writes the run directory.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available() and cfg.model.device in (None, "cuda"):
        cfg.model.device = f"cuda:{local}"
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")


def sync_gradients(params: list[torch.nn.Parameter]) -> None:
    """Average gradients over processes (a no-op in a single process)."""
    _, size = world()
    if size == 1:
        return
    import torch.distributed as dist

    for p in params:
        if p.grad is None:  # every process must join every all_reduce
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= size


def agree_max(value: int) -> int:
    """The largest ``value`` over processes (so all run the same number of optimizer steps)."""
    _, size = world()
    if size == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


class _NoMetrics:
    def write(self, row) -> None:
        pass

    def close(self) -> None:
        pass


# ----- building ----------------------------------------------------------------------------

def build_trainer(cfg: TrainConfig, log: Callable[[str], None] = print) -> Trainer:
    from turngym.agents.hf import HFPolicy
    from turngym.agents.models import load_model
    from turngym.agents.prompts import PromptConfig

    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model(cfg.model.name, device=cfg.model.device, dtype=cfg.model.dtype, seed=cfg.seed)
    if cfg.model.lora:
        from peft import LoraConfig, get_peft_model

        depth = model.config.num_hidden_layers
        top = list(range(depth - cfg.model.lora_layers, depth)) if 0 < cfg.model.lora_layers < depth else None
        lora = LoraConfig(r=cfg.model.lora_rank, lora_alpha=cfg.model.lora_alpha,
                          lora_dropout=cfg.model.lora_dropout, target_modules=list(cfg.model.lora_target_modules),
                          layers_to_transform=top, task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    critic = cfg.rl.estimator in CRITIC_ESTIMATORS
    value_head = None
    modules = torch.nn.ModuleDict({"policy": model})
    if critic:
        value_head = torch.nn.Linear(model.config.hidden_size, 2).to(next(model.parameters()).device)
        torch.nn.init.zeros_(value_head.weight)
        torch.nn.init.zeros_(value_head.bias)
        modules["value_head"] = value_head
    action_format = "tags" if cfg.rl.estimator == "hiper" else "plain"
    # HiPER's segments come from the reply's own <switch>/<subgoal> tags: ask for them
    extra = {"": HIPER_FORMAT} if cfg.rl.estimator == "hiper" else {}
    prompt = PromptConfig(action_format=action_format, env_prompts=extra, **dataclasses.asdict(cfg.prompt))
    gen = cfg.generation
    policy = HFPolicy(model, tokenizer, temperature=gen.temperature, top_p=gen.top_p,
                      max_new_tokens=gen.max_new_tokens, prompt=prompt, batch_size=cfg.env.num_envs)
    eval_policy = HFPolicy(model, tokenizer, temperature=gen.eval_temperature, max_new_tokens=gen.max_new_tokens,
                           prompt=prompt, batch_size=cfg.env.num_envs)
    rollout_policy = policy
    if gen.server_url:
        from turngym.agents.openai_policy import OpenAIPolicy

        rollout_policy = OpenAIPolicy(gen.server_url, gen.server_model, temperature=gen.temperature,
                                      top_p=gen.top_p, max_tokens=gen.max_new_tokens, prompt=prompt,
                                      seed=cfg.seed, token_ids=False)
    return Trainer(cfg=cfg, model=model, tokenizer=tokenizer, policy=policy, rollout_policy=rollout_policy,
                   eval_policy=eval_policy, value_head=value_head, modules=modules,
                   np_rng=np.random.default_rng(cfg.seed), log=log)


def make_optimizer(tr: Trainer, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    params = [p for p in tr.modules.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


# ----- tasks -------------------------------------------------------------------------------

def split_task_ids(env_id: str, split: str, env_kwargs: dict) -> list[str]:
    import turngym

    env = turngym.make(env_id, **env_kwargs)
    try:
        ids = list(env.unwrapped.task_ids(split))
    finally:
        env.close()
    if not ids:
        raise ValueError(f"env.train_split/eval_split: {env_id} has no tasks in split {split!r}")
    return ids


def next_tasks(tr: Trainer, all_ids: list[str], n: int) -> list[str]:
    """The next ``n`` tasks of a shuffled pass over the split (reshuffled each pass)."""
    out = []
    while len(out) < n:
        order = tr.state.get("task_order")
        if not order or tr.state["task_cursor"] >= len(order):
            tr.state["task_order"] = [all_ids[i] for i in tr.np_rng.permutation(len(all_ids))]
            tr.state["task_cursor"] = 0
        out.append(tr.state["task_order"][tr.state["task_cursor"]])
        tr.state["task_cursor"] += 1
    return out


# ----- scoring -----------------------------------------------------------------------------

def score(tr: Trainer, samples_prompt: list[list[int]], samples_completion: list[list[int]], *, with_grad: bool,
          reference: bool = False):
    from turngym.agents.scoring import score_completions

    kwargs = dict(temperature=tr.policy.temperature, with_grad=with_grad, pad_id=tr.tokenizer.pad_token_id or 0,
                  compute_entropy=False)
    if reference:
        if tr.cfg.model.lora:
            with tr.model.disable_adapter(), torch.no_grad():  # the base model is the reference
                return score_completions(tr.model, samples_prompt, samples_completion,
                                         **{**kwargs, "with_grad": False})
        return score_completions(tr.state["reference_model"], samples_prompt, samples_completion,
                                 **{**kwargs, "with_grad": False})
    return score_completions(tr.model, samples_prompt, samples_completion, **kwargs)


def prompt_values(tr: Trainer, prompts: list[list[int]], with_grad: bool = False) -> torch.Tensor:
    """Value head on the (detached) hidden state of each prompt's last token: [B, 2] (low, high)."""
    from turngym.agents.decoding import keep_last

    device = next(tr.model.parameters()).device
    width = max(len(p) for p in prompts)
    pad = tr.tokenizer.pad_token_id or 0
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    att = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding: the last column is every prompt's last token
        ids[i, width - len(p):] = torch.tensor(p)
        att[i, width - len(p):] = 1
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = tr.model(input_ids=ids.to(device), attention_mask=att.to(device), position_ids=pos.to(device),
                       output_hidden_states=True, use_cache=False, logits_to_keep=keep_last(1, device))
        hidden = out.hidden_states[-1][:, -1, :].float()
    with torch.set_grad_enabled(with_grad):
        return tr.value_head(hidden)


def batched(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i:i + size]


# ----- advantages --------------------------------------------------------------------------

def compute_advantages(tr: Trainer, trajectories: list[Trajectory]) -> list[Sample]:
    """Fill ``Step.advantage`` and build the loss rows of every step that has completion tokens."""
    cfg = tr.cfg.rl
    name = cfg.estimator
    args = dict(cfg.estimator_args)
    steps = [(t, s) for t in trajectories for s in t.steps]
    tokens_per_step = {id(s): [] for _, s in steps}
    targets = weights = None
    if name in CRITIC_ESTIMATORS:
        values = np.zeros((len(steps), 2))
        with_ids = [k for k, (_, s) in enumerate(steps) if s.prompt_ids]
        for chunk in batched(with_ids, cfg.micro_batch_size):
            values[chunk] = prompt_values(tr, [steps[k][1].prompt_ids for k in chunk]).cpu().numpy()
        per_traj_lo, per_traj_hi, k = [], [], 0
        for t in trajectories:
            per_traj_lo.append(values[k:k + len(t.steps), 0])
            per_traj_hi.append(values[k:k + len(t.steps), 1])
            k += len(t.steps)
        if name == "turn_gae":
            step_adv, target_lo = ESTIMATORS[name](trajectories, per_traj_lo, **args)
            targets = [np.stack([lo, np.zeros_like(lo)], 1) for lo in target_lo]
            weights = [np.stack([np.ones_like(lo), np.zeros_like(lo)], 1) for lo in target_lo]
        else:
            switches = [[(s.spans.get("switch") is not None and _span_text(tr, s, "switch").upper() == "SWITCH")
                         for s in t.steps] for t in trajectories]
            out = ESTIMATORS[name](trajectories, per_traj_lo, per_traj_hi, switches=switches, **args)
            step_adv = out["action"]
            targets = [np.stack([lo, hi], 1) for lo, hi in zip(out["target_lo"], out["target_hi"])]
            weights = [np.stack([np.ones(len(st)), st.astype(float)], 1) for st in out["segment_start"]]
            for t, sub, sw in zip(trajectories, out["subgoal"], out["switch"]):
                for s, a_sub, a_sw in zip(t.steps, sub, sw):
                    tokens_per_step[id(s)] = [("subgoal", float(a_sub)), ("switch", float(a_sw))]
    else:
        step_adv = ESTIMATORS[name](trajectories, **args)
    if cfg.empg:
        step_adv = empg.modulate(trajectories, step_adv, **cfg.empg_args)
    samples = []
    for i, (t, adv) in enumerate(zip(trajectories, step_adv)):
        t.metadata["estimator"] = name + ("+empg" if cfg.empg else "")
        for j, (s, a) in enumerate(zip(t.steps, adv)):
            s.advantage = float(a)
            if not s.completion_ids or not t.scorable:
                continue
            token_adv = [float(a)] * len(s.completion_ids)
            if tokens_per_step[id(s)]:  # hierarchical: subgoal / switch tokens get their own advantage
                offsets = token_offsets(tr.tokenizer, s.completion_ids)
                for span_name, value in tokens_per_step[id(s)]:
                    for k, inside in enumerate(token_span_mask(offsets, s.spans.get(span_name))):
                        if inside:
                            token_adv[k] = value
            old = list(s.logprobs) if len(s.logprobs) == len(s.completion_ids) else []
            mask = list(s.loss_mask) if len(s.loss_mask) == len(s.completion_ids) else [1] * len(token_adv)
            sample = Sample(s.prompt_ids, s.completion_ids, old, token_adv, mask)
            if targets is not None:
                sample.value_targets = tuple(float(x) for x in targets[i][j])
                sample.value_weights = tuple(float(x) for x in weights[i][j])
            samples.append(sample)
    return samples


def _span_text(tr: Trainer, step, name: str) -> str:
    reply = tr.tokenizer.decode(step.completion_ids, skip_special_tokens=True)
    a, b = step.spans[name]
    return reply[a:b].strip()


# ----- updates -----------------------------------------------------------------------------

def rl_update(tr: Trainer, optimizer, samples: list[Sample]) -> dict[str, float]:
    cfg = tr.cfg.rl
    dropped = 0
    if cfg.kl_coef == 0 and tr.value_head is None:
        # a turn whose tokens all have advantage 0 adds nothing to the clipped PG loss (no KL or
        # value term to fit): skip its forward/backward, often most of a sparse-reward batch
        kept = [s for s in samples if any(a != 0.0 for a in s.advantages)]
        dropped, samples = len(samples) - len(kept), kept
    if not samples and world()[1] == 1:
        return {"policy/zero_advantage_turns": dropped}
    missing = [s for s in samples if not s.old_logprobs]
    for chunk in batched(missing, cfg.micro_batch_size):  # e.g. remote generation: recompute here
        scores = score(tr, [s.prompt_ids for s in chunk], [s.completion_ids for s in chunk], with_grad=False)
        for s, lp in zip(chunk, scores.to_lists()[0]):
            s.old_logprobs = lp
    sums = {"loss/policy": 0.0, "loss/kl": 0.0, "loss/value": 0.0, "policy/clip_frac": 0.0,
            "policy/grad_norm": 0.0}
    n_steps = 0
    device = next(tr.model.parameters()).device
    tr.model.train()
    rank, _ = world()
    params = [p for p in tr.modules.parameters() if p.requires_grad]
    # all processes take the same number of optimizer steps (one with no samples adds zeros)
    n_minibatches = agree_max(math.ceil(len(samples) / cfg.minibatch_size))
    for epoch in range(cfg.epochs):
        # a stream of its own, derived from the update: the task-order stream stays in step
        # across processes whatever their sample counts
        order = np.random.default_rng([tr.cfg.seed, tr.state.get("update", 0), epoch, rank]).permutation(len(samples))
        for i in range(n_minibatches):
            mb_idx = order[i * cfg.minibatch_size:(i + 1) * cfg.minibatch_size]
            # prompts in token order: a micro-batch holds turns of one task, whose common head
            # (system prompt, task statement) is encoded once; the minibatch gradient is the same
            minibatch = sorted((samples[k] for k in mb_idx), key=lambda s: s.prompt_ids)
            num_tokens = float(max(sum(sum(s.loss_mask) for s in minibatch), 1))
            optimizer.zero_grad(set_to_none=True)
            for micro in batched(minibatch, cfg.micro_batch_size):
                prompts = [s.prompt_ids for s in micro]
                comps = [s.completion_ids for s in micro]
                scores = score(tr, prompts, comps, with_grad=True)
                width = scores.logprobs.shape[1]
                old = _pad([s.old_logprobs for s in micro], width, device)
                adv = _pad([s.advantages for s in micro], width, device)
                # padding and any token the record masks out (e.g. a forced prefix) carry no loss
                mask = scores.mask * _pad([s.loss_mask for s in micro], width, device)
                pg, clip_frac = clipped_policy_loss(scores.logprobs, old, adv, mask, num_tokens,
                                                    cfg.clip_low, cfg.clip_high)
                loss = pg
                sums["loss/policy"] += pg.item()
                sums["policy/clip_frac"] += clip_frac.item()
                if cfg.kl_coef > 0:
                    ref = score(tr, prompts, comps, with_grad=False, reference=True)
                    kl = kl_to_reference(scores.logprobs, ref.logprobs, mask, num_tokens)
                    loss = loss + cfg.kl_coef * kl
                    sums["loss/kl"] += kl.item()
                if tr.value_head is not None:
                    pred = prompt_values(tr, prompts, with_grad=True)
                    target = torch.tensor([s.value_targets for s in micro], dtype=torch.float32, device=device)
                    weight = torch.tensor([s.value_weights for s in micro], dtype=torch.float32, device=device)
                    # this micro-batch's share of the minibatch's value loss
                    vl = value_loss(pred, target, weight) * (len(micro) / len(minibatch))
                    loss = loss + cfg.value_coef * vl
                    sums["loss/value"] += vl.item()
                loss.backward()
            sync_gradients(params)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            sums["policy/grad_norm"] += float(grad_norm)
            n_steps += 1
    tr.model.eval()
    out = {k: v / max(n_steps, 1) for k, v in sums.items()}
    if cfg.kl_coef == 0:
        out.pop("loss/kl")
    if tr.value_head is None:
        out.pop("loss/value")
    out["policy/zero_advantage_turns"] = dropped
    return out


def _pad(rows: list[list[float]], width: int, device) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r[:width], dtype=torch.float32)
    return out.to(device)


def run_sft(tr: Trainer, pool, train_ids: list[str]) -> dict[str, float]:
    """Imitate expert episodes: token-mean NLL of the expert's replies given the same prompts RL uses."""
    from turngym.agents.basic import ExpertPolicy

    cfg = tr.cfg.sft
    tasks = [train_ids[i % len(train_ids)] for i in tr.np_rng.permutation(max(cfg.episodes, len(train_ids)))]
    tasks = tasks[:cfg.episodes]
    # the expert runs to the env's own turn limit (not RL's max_turns); only its successes are imitated
    expert = pool.rollout(ExpertPolicy(), tasks, group_size=1, seed=tr.cfg.seed + 7919)
    episodes = [sft_examples(tr.policy, [t]) for t in expert if t.success]
    rows = [row for episode in episodes for row in episode]
    optimizer = make_optimizer(tr, cfg.lr)
    losses = []
    tr.model.train()
    bar = _progress(tr, total=cfg.epochs * ((len(rows) + cfg.batch_size - 1) // cfg.batch_size), desc="sft")
    for _ in range(cfg.epochs):
        # whole episodes in random order: a batch holds a few episodes, and the turns of one
        # episode share their prompt head (system prompt, task), which scoring encodes once
        order = [row for k in tr.np_rng.permutation(len(episodes)) for row in episodes[k]]
        for mb in batched(order, cfg.batch_size):
            mb = sorted(mb, key=lambda row: row[0])
            optimizer.zero_grad(set_to_none=True)
            num_tokens = float(sum(len(c) for _, c in mb))
            total = 0.0
            for micro in batched(mb, cfg.micro_batch_size):
                scores = score(tr, [p for p, _ in micro], [c for _, c in micro], with_grad=True)
                loss = sft_loss(scores.logprobs, scores.mask, num_tokens)
                loss.backward()
                total += loss.item()
            params = [p for p in tr.modules.parameters() if p.requires_grad]
            sync_gradients(params)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            losses.append(total)
            bar.update(1)
            bar.set_postfix(loss=f"{total:.3f}")
    bar.close()
    tr.model.eval()
    return {"sft/loss_first": losses[0] if losses else None, "sft/loss_last": losses[-1] if losses else None,
            "sft/episodes": len(expert), "sft/turns": len(rows),
            "sft/expert_success_rate": float(np.mean([t.success for t in expert])) if expert else None}


# ----- evaluation and summaries --------------------------------------------------------------

def summarize(trajectories: list[Trajectory], prefix: str) -> dict[str, float]:
    ok = [t for t in trajectories if t.scorable]
    if not ok:
        return {f"{prefix}/episodes": 0}
    return {f"{prefix}/success_rate": float(np.mean([t.success for t in ok])),
            f"{prefix}/mean_return": float(np.mean([t.episode_return for t in ok])),
            f"{prefix}/mean_steps": float(np.mean([t.length for t in ok])),
            f"{prefix}/episodes": len(ok),
            f"{prefix}/unscorable": len(trajectories) - len(ok)}


def evaluate(tr: Trainer, pool, eval_ids: list[str], update: int) -> dict[str, float]:
    cfg = tr.cfg
    tasks = [eval_ids[i % len(eval_ids)] for i in range(cfg.eval.episodes)]
    tr.eval_policy.reset_history()
    bar = _progress(tr, total=len(tasks), desc=f"eval {update}")
    # a fixed seed: every evaluation sees the same episodes, so curves compare like with like
    trajectories = collect(pool, tr.eval_policy, tasks, group_size=1, seed=cfg.seed + 100_003,
                           max_steps=cfg.env.max_turns, tokenizer=tr.tokenizer, bar=bar)
    bar.close()
    tr.eval_policy.reset_history()  # free the key/value cache (gigabytes) until the next evaluation
    write_jsonl(Path(cfg.run_dir) / "eval" / f"update_{update:04d}.jsonl", trajectories, append=False)
    return summarize(trajectories, "eval")


def _progress(tr: Trainer, total: int, desc: str, initial: int = 0):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, disable=not tr.cfg.progress or world()[0] != 0,
                dynamic_ncols=True,
                leave=False)


# ----- the run -----------------------------------------------------------------------------

def train(cfg: TrainConfig, log: Callable[[str], None] = print, stop_after: int | None = None,
          rollout_policy: Any = None) -> Trainer:
    """Run (or resume) a training run; returns the Trainer (model, policies, state).

    ``stop_after``: return after this many updates as if the process had been killed (tests).
    ``rollout_policy``: generate training rollouts with this policy instead (any object with
    ``act``; replies without token data are re-tokenized and re-scored by the trainer).
    """
    from turngym.core.pool import EnvPool

    init_distributed(cfg)
    rank, size = world()
    main = rank == 0
    if not main:
        log = _quiet
    run_dir = Path(cfg.run_dir)
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(dump_yaml(cfg))
    tr = build_trainer(cfg, log)
    if rollout_policy is not None:
        tr.rollout_policy = rollout_policy
    if not cfg.model.lora and cfg.rl.kl_coef > 0:
        import copy

        tr.state["reference_model"] = copy.deepcopy(tr.model).eval().requires_grad_(False)
    optimizer = make_optimizer(tr, cfg.rl.lr, cfg.rl.weight_decay)
    tr.state.update(update=0, env_steps=0, episodes=0, task_order=None, task_cursor=0, phase="start",
                    start_row=None)
    last = ckpt.latest_checkpoint(run_dir) if cfg.resume else None
    if last is not None:
        saved = ckpt.load_checkpoint(last, tr.modules, optimizer, tr.np_rng)
        tr.state.update(saved)
        log(f"resumed from {last} (update {tr.state['update']})")
    if size > 1:
        import torch.distributed as dist

        dist.barrier()  # nobody writes a checkpoint before everyone has read theirs
    metrics = MetricsWriter(run_dir, tensorboard=cfg.tensorboard,
                            keep_until_update=tr.state["update"] if last is not None else -1) \
        if main else _NoMetrics()
    env_kwargs = dict(cfg.env.kwargs)
    train_ids = split_task_ids(cfg.env.id, cfg.env.train_split, env_kwargs)
    eval_ids = split_task_ids(cfg.env.id, cfg.env.eval_split, env_kwargs)
    pool = EnvPool(cfg.env.id, num_envs=cfg.env.num_envs, backend=cfg.env.backend, env_kwargs=env_kwargs,
                   ray_address=cfg.env.ray_address)
    try:
        if tr.state["phase"] in ("start", "sft_done"):
            row: dict[str, Any] = dict(tr.state.get("start_row") or {"update": 0, "env_steps": 0, "episodes": 0})
            if tr.state["phase"] == "start":
                if cfg.eval.at_start and main:
                    # said before it starts: with an LLM this is minutes, and nothing else moves meanwhile
                    log(f"zero-shot eval: {cfg.eval.episodes} held-out episodes ({cfg.env.eval_split})")
                    t0 = time.perf_counter()
                    row.update(evaluate(tr, pool, eval_ids, 0), **{"time/eval": time.perf_counter() - t0})
                    log(f"update 0: eval success {row.get('eval/success_rate', 0):.2f}")
                if cfg.sft.episodes > 0:
                    log(f"sft: imitating {cfg.sft.episodes} expert episodes")
                    t0 = time.perf_counter()
                    row.update(run_sft(tr, pool, train_ids), **{"time/sft": time.perf_counter() - t0})
                    log(f"sft: loss {row['sft/loss_first']:.3f} -> {row['sft/loss_last']:.3f} "
                        f"on {row['sft/turns']} expert turns")
                    if cfg.checkpoint_every and main and cfg.eval.at_start:
                        # keep the SFT weights before the next long evaluation: a run killed
                        # during it resumes here instead of redoing SFT
                        tr.state.update(phase="sft_done", start_row=row)
                        ckpt.save_checkpoint(run_dir, 0, tr.modules, optimizer, _saved_state(tr), tr.np_rng,
                                             cfg.keep_checkpoints)
            if cfg.sft.episodes > 0 and cfg.eval.at_start and main:
                log(f"eval after sft: {cfg.eval.episodes} held-out episodes")
                t0 = time.perf_counter()
                after = evaluate(tr, pool, eval_ids, 0)
                row.update({k.replace("eval/", "eval_after_sft/"): v for k, v in after.items()},
                           **{"time/eval_after_sft": time.perf_counter() - t0})
            metrics.write(row)
            tr.state.update(phase="rl", start_row=None)
            if cfg.checkpoint_every and main:
                ckpt.save_checkpoint(run_dir, 0, tr.modules, optimizer, _saved_state(tr), tr.np_rng,
                                     cfg.keep_checkpoints)
        bar = _progress(tr, total=cfg.rl.updates, desc="rl", initial=tr.state["update"])
        while tr.state["update"] < cfg.rl.updates:
            if stop_after is not None and tr.state["update"] >= stop_after:
                break
            update = tr.state["update"] + 1
            row = one_update(tr, pool, optimizer, train_ids, update)
            if main and (cfg.eval.every and update % cfg.eval.every == 0 or update == cfg.rl.updates):
                log(f"update {update}: train success {row.get('train/success_rate', 0):.2f}; "
                    f"eval on {cfg.eval.episodes} held-out episodes")
                t0 = time.perf_counter()
                row.update(evaluate(tr, pool, eval_ids, update), **{"time/eval": time.perf_counter() - t0})
            tr.state["update"] = update
            metrics.write(row)
            bar.update(1)
            bar.set_postfix(success=f"{row.get('train/success_rate', 0):.2f}",
                            ret=f"{row.get('train/mean_return', 0):.2f}")
            if main and cfg.checkpoint_every and (update % cfg.checkpoint_every == 0 or update == cfg.rl.updates):
                ckpt.save_checkpoint(run_dir, update, tr.modules, optimizer, _saved_state(tr), tr.np_rng,
                                     cfg.keep_checkpoints)
        bar.close()
    finally:
        pool.close()
        metrics.close()
    if main and read_metrics(run_dir / "metrics.jsonl"):
        from turngym.viewer import write_report

        plot_curves(run_dir)
        write_report(run_dir)  # run_dir/report.html: curves, success by task type, links into the viewer
    return tr


def _quiet(_: str) -> None:
    pass


def _saved_state(tr: Trainer) -> dict[str, Any]:
    return {k: tr.state.get(k) for k in ("update", "env_steps", "episodes", "task_order", "task_cursor", "phase",
                                         "start_row")}


def one_update(tr: Trainer, pool, optimizer, train_ids: list[str], update: int) -> dict[str, Any]:
    cfg = tr.cfg
    t0 = time.perf_counter()
    rank, size = world()
    # every process draws the whole update's tasks (keeping the task stream in step) and runs its share
    tasks = next_tasks(tr, train_ids, cfg.rl.tasks_per_update * size)[rank::size]
    tr.policy.reset_history()  # each update stands alone: prompts never depend on earlier updates
    bar = _progress(tr, total=len(tasks) * cfg.rl.group_size, desc=f"rollouts {update}")
    trajectories = collect(pool, tr.rollout_policy, tasks, group_size=cfg.rl.group_size,
                           seed=cfg.seed + 1000 * update, max_steps=cfg.env.max_turns, tokenizer=tr.tokenizer,
                           bar=bar)
    bar.close()
    tr.policy.reset_history()  # the update changes the weights: the cached keys are stale anyway
    retokenized = attach_tokens(tr.policy, trajectories) if tr.rollout_policy is not tr.policy else 0
    t1 = time.perf_counter()
    samples = compute_advantages(tr, trajectories)
    t2 = time.perf_counter()
    losses = rl_update(tr, optimizer, samples)
    if tr.cfg.generation.server_sync == "vllm_lora":
        sync_server(tr)
    t3 = time.perf_counter()
    if cfg.save_rollouts and rank == 0:
        write_jsonl(Path(cfg.run_dir) / "rollouts" / f"update_{update:04d}.jsonl", trajectories, append=False)
    steps = sum(t.length for t in trajectories)
    tr.state["env_steps"] += steps
    tr.state["episodes"] += len(trajectories)
    entropies = [e for t in trajectories for s in t.steps for e in s.entropies]
    tokens = sum(len(s.completion_ids) for s in samples)
    signal = learning_signal(trajectories)
    if signal["advantage/nonzero_turns"] == 0:
        # every group had identical outcomes: the update cannot change the policy
        tr.log(f"warning: update {update} had no learning signal (all {signal['train/groups']} groups had "
               "identical returns, every advantage is 0)")
    return {"update": update, "env_steps": tr.state["env_steps"], "episodes": tr.state["episodes"],
            **summarize(trajectories, "train"), **losses, **signal,
            "warning/no_signal": int(signal["advantage/nonzero_turns"] == 0),
            "policy/entropy": float(np.mean(entropies)) if entropies else None,
            "policy/completion_tokens": tokens,
            **({"policy/retokenized_steps": retokenized} if retokenized else {}),
            **({"processes": size} if size > 1 else {}),  # train/ figures are rank 0's share
            "advantage/mean_abs": float(np.mean([abs(s.advantage or 0.0) for t in trajectories for s in t.steps]))
            if steps else None,
            "time/rollout": t1 - t0, "time/advantages": t2 - t1, "time/update": t3 - t2,
            "time/update_tokens_per_s": tokens / (t3 - t2) if losses.get("loss/policy") is not None else None}


def learning_signal(trajectories: list[Trajectory]) -> dict[str, Any]:
    """How much of an update can teach anything: groups whose members' returns differ, and
    turns with a non-zero advantage (written by ``compute_advantages``)."""
    groups: dict[str, set] = {}
    for t in trajectories:
        if t.scorable:
            groups.setdefault(t.group_id, set()).add(round(t.episode_return, 9))
    turns = [s for t in trajectories if t.scorable for s in t.steps if s.completion_ids]
    return {"train/groups": len(groups), "train/mixed_groups": sum(len(r) > 1 for r in groups.values()),
            "advantage/nonzero_turns": sum(abs(s.advantage or 0.0) > 1e-9 for s in turns),
            "advantage/turns": len(turns)}


def sync_server(tr: Trainer) -> None:
    """Hand the new LoRA adapter to a vLLM server (runtime LoRA loading) under a fresh name, and
    point the rollout policy at it. vLLM must run with ``--enable-lora`` and
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, and see ``run_dir`` at the same path."""
    import json
    import urllib.request

    if not tr.cfg.model.lora:
        raise ValueError("generation.server_sync: 'vllm_lora' needs model.lora: true")
    name = f"turngym-update-{tr.state['update'] + 1:04d}"
    path = (Path(tr.cfg.run_dir) / "adapter" / name).resolve()
    tr.model.save_pretrained(str(path))
    root = tr.cfg.generation.server_url.rstrip("/")
    root = root if root.endswith("/v1") else root + "/v1"
    request = urllib.request.Request(f"{root}/load_lora_adapter", method="POST",
                                     data=json.dumps({"lora_name": name, "lora_path": str(path)}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
    tr.rollout_policy.model = name
