"""Trainer tests: config checking, losses, spans, and short real runs (tiny random-init Llama on
the Counter env): SFT then RL, every estimator family, the KL's reference, the CLI, and exact resume
after the training process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import trainer_envs  # noqa: E402,F401  (registers the shaped counter)
from policy_models import one_torch_thread  # noqa: E402
from trainer_runs import comparable, torchrun_train  # noqa: E402

from turngym.core.collect import parse_spans  # noqa: E402
from turngym.core.policy import Completion  # noqa: E402
from turngym.core.records import read_jsonl  # noqa: E402
from turngym.core.runs import read_metrics  # noqa: E402
from turngym.trainers.config import TrainConfig, describe, load_config  # noqa: E402
from turngym.trainers.losses import clipped_policy_loss, kl_to_reference, sft_loss, value_loss  # noqa: E402
from turngym.trainers.rollout import token_offsets  # noqa: E402
from turngym.trainers.spans import token_span_mask  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# Small everything: 2 tasks x 2 rollouts, 3 turns, 4 new tokens a turn.
BASE = [
    "model.name=tiny",
    f"env.id={trainer_envs.ENV_ID}",
    "env.eval_split=test",
    "env.num_envs=4",
    "env.max_turns=3",
    "rl.tasks_per_update=2",
    "rl.group_size=2",
    "rl.minibatch_size=6",
    "rl.micro_batch_size=3",
    "rl.lr=1e-3",
    "eval.episodes=2",
    "progress=false",
    "generation.max_new_tokens=4",
    "model.lora_rank=4",
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def cfg_for(tmp_path, *extra: str, name: str = "run") -> TrainConfig:
    return load_config(None, [*BASE, f"run_dir={tmp_path / name}", *extra])


# ----- config ------------------------------------------------------------------------------


def test_config_names_unknown_and_invalid_fields(tmp_path):
    with pytest.raises(ValueError, match=r"^rl\.estimatr: unknown field"):
        load_config(None, ["rl.estimatr=grpo"])
    with pytest.raises(ValueError, match=r"^rl\.estimator: 'ppo' is not allowed; allowed: grpo, rloo"):
        load_config(None, ["rl.estimator=ppo"])
    with pytest.raises(ValueError, match=r"^rl\.group_size: expected int"):
        load_config(None, ["rl.group_size=many"])
    with pytest.raises(ValueError, match=r"^rl\.group_size: must be >= 1"):
        load_config(None, ["rl.group_size=0"])
    with pytest.raises(ValueError, match=r"^model\.lora: expected true or false"):
        load_config(None, ["model.lora=3"])
    with pytest.raises(
        ValueError,
        match=r"^rl\.estimator_args\.depth: not an option of estimator 'hgpo'; "
        r"allowed: max_depth, alpha",
    ):
        load_config(None, ["rl.estimator=hgpo", "rl.estimator_args={depth: 3}"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("env:\n  idd: x\n")
    with pytest.raises(ValueError, match=r"^env\.idd: unknown field; allowed: id, kwargs"):
        load_config(bad)


def test_config_yaml_toml_and_overrides(tmp_path):
    (tmp_path / "a.yaml").write_text("seed: 3\nrl:\n  estimator: rloo\n  lr: 2e-5\n")
    (tmp_path / "a.toml").write_text("seed = 3\n[rl]\nestimator = 'rloo'\nlr = 2e-5\n")
    for name in ("a.yaml", "a.toml"):
        cfg = load_config(tmp_path / name, ["rl.group_size=4", "model.lora_target_modules=[q_proj]"])
        assert (cfg.seed, cfg.rl.estimator, cfg.rl.lr, cfg.rl.group_size) == (3, "rloo", 2e-5, 4)
        assert cfg.model.lora_target_modules == ["q_proj"]
    for example in sorted(p for p in (REPO / "examples").glob("*.*") if p.suffix != ".py"):
        load_config(example)  # the shipped examples stay valid
    rows = describe()
    assert len(rows) == len({r[0] for r in rows}) > 40
    assert all(help_ for *_, help_ in rows), "every field is documented"


# ----- losses and spans -----------------------------------------------------------------------


def test_clipped_loss_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.1]]))
    old = torch.log(torch.tensor([[0.25, 0.5, 0.1]]))  # ratios 2, 1, 1
    adv = torch.tensor([[1.0, -1.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is not the agent's
    loss, clip_frac = clipped_policy_loss(logp, old, adv, mask, num_tokens=2, clip_low=0.2, clip_high=0.28)
    # token 1: min(2*1, 1.28*1) = 1.28; token 2: min(-1, -1) = -1; masked token ignored
    assert loss.item() == pytest.approx(-(1.28 - 1.0) / 2)
    assert clip_frac.item() == pytest.approx(0.5)
    assert kl_to_reference(logp, logp, mask, 2).item() == pytest.approx(0.0)
    assert kl_to_reference(logp, old, mask, 2).item() > 0
    assert sft_loss(logp, mask, 2).item() == pytest.approx(-np.log(0.5))
    pred, target = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 5.0]])
    assert value_loss(pred, target, torch.tensor([[1.0, 0.0]])).item() == pytest.approx(0.5)


def test_micro_batches_add_up_to_the_full_batch():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, requires_grad=True)
    old = torch.randn(4, 5).detach()
    adv, mask = torch.randn(4, 5), (torch.rand(4, 5) > 0.3).float()
    n = mask.sum().item()
    full, _ = clipped_policy_loss(logits, old, adv, mask, n)
    (g_full,) = torch.autograd.grad(full, logits)
    parts = [
        clipped_policy_loss(logits[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], n)[0] for i in (0, 2)
    ]
    (g_acc,) = torch.autograd.grad(sum(parts), logits)
    assert torch.allclose(g_full, g_acc)


def test_spans():
    text = "<think>hmm</think><switch>SWITCH</switch><subgoal>find mug</subgoal><action>go to desk 1</action>"
    spans = parse_spans(text)
    assert {k: text[a:b] for k, (a, b) in spans.items()} == {
        "think": "hmm",
        "switch": "SWITCH",
        "subgoal": "find mug",
        "action": "go to desk 1",
    }
    assert parse_spans("go to desk 1") == {"action": [0, 12]}
    assert token_span_mask([(0, 3), (3, 6), (6, 9)], [4, 6]) == [0, 1, 0]


# ----- real runs -----------------------------------------------------------------------------


@pytest.mark.slow
def test_sft_then_rl_writes_the_run_directory(tmp_path):
    from turngym.trainers.loop import train

    cfg = cfg_for(
        tmp_path,
        "sft.episodes=4",
        "sft.batch_size=4",
        "rl.updates=2",
        "eval.every=1",
        "rl.estimator=gigpo",
        "rl.kl_coef=0.1",
        "rl.empg=true",
    )
    tr = train(cfg, log=lambda _: None)
    run = Path(cfg.run_dir)
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["update"] for r in rows] == [0, 1, 2]
    first = rows[0]
    assert first["sft/turns"] > 0 and first["sft/expert_success_rate"] == 1.0
    assert "eval/success_rate" in first and "eval_after_sft/success_rate" in first
    assert rows[2]["env_steps"] > rows[1]["env_steps"] > 0
    assert "loss/kl" in rows[1] and "eval/mean_return" in rows[2]
    assert (run / "config.yaml").exists() and (run / "curves.png").stat().st_size > 0
    assert "<svg" in (run / "report.html").read_text()  # the run report, written at the end
    assert any((run / "tb").iterdir())
    # the zero-shot episodes keep their own file; update 0 is the policy after SFT
    assert sorted(p.name for p in (run / "eval").iterdir()) == [
        "update_0000.jsonl",
        "update_0001.jsonl",
        "update_0002.jsonl",
        "zero_shot.jsonl",
    ]
    zero_shot, after_sft = (
        read_jsonl(run / "eval" / "zero_shot.jsonl"),
        read_jsonl(run / "eval" / "update_0000.jsonl"),
    )
    assert len(zero_shot) == len(after_sft) == cfg.eval.episodes
    assert np.mean([t.success for t in zero_shot]) == first["eval/success_rate"]
    assert np.mean([t.success for t in after_sft]) == first["eval_after_sft/success_rate"]
    trajs = read_jsonl(run / "rollouts" / "update_0001.jsonl")
    assert len(trajs) == 4 and len({t.group_id for t in trajs}) == 2
    step = trajs[0].steps[0]
    assert trajs[0].metadata["estimator"] == "gigpo+empg"
    assert step.advantage is not None and step.state_key and step.spans
    assert (
        step.prompt_ids
        and len(step.completion_ids) == len(step.logprobs) == len(step.entropies) == len(step.loss_mask) > 0
    )
    # the rewards differ inside groups, so advantages (and weights) moved
    assert any(abs(s.advantage) > 0 for t in trajs for s in t.steps)
    assert rows[1]["policy/grad_norm"] > 0
    assert tr.model.peft_config  # LoRA by default
    # every row and record names the env version it was made on
    from turngym.core.versions import env_hash

    version = env_hash(cfg.env.id, **cfg.env.kwargs)
    assert [(r["env_id"], r["env_hash"]) for r in rows] == [(cfg.env.id, version)] * 3
    assert {t.env_hash for t in trajs + after_sft} == {version}


@pytest.mark.slow
@pytest.mark.parametrize("lora", ["true", "false"])
def test_a_finished_run_leaves_its_policy_loadable_by_path(tmp_path, lora):
    """run_dir/model/ is the trained policy: hf:PATH computes the trainer's logits exactly (with
    LoRA from the adapter kept apart, not merged), is shown the prompt it was trained with, so
    it replays the run's last evaluation episode for episode, and turngym eval plays it."""
    from turngym.agents.loading import load_policy
    from turngym.core.collect import collect
    from turngym.core.pool import EnvPool
    from turngym.trainers.loop import train
    from turngym.trainers.setup import run_task_ids

    cfg = cfg_for(
        tmp_path,
        "sft.episodes=2",
        "sft.batch_size=2",
        "rl.updates=1",
        "eval.at_start=false",
        "eval.episodes=2",
        f"model.lora={lora}",
        "model.lora_layers=1",
        "tensorboard=false",
        "prompt.history=last_k",
        "prompt.history_k=1",
        "prompt.system_prompt=Say words.",
    )
    tr = train(cfg, log=lambda _: None)
    folder = Path(cfg.run_dir) / "model"
    assert (folder / "adapter_config.json").exists() == (lora == "true")
    policy = load_policy(f"hf:{folder}", device="cpu", dtype=cfg.model.dtype, temperature=0)
    assert policy.prompt == tr.eval_policy.prompt and policy.prompt.system_prompt == "Say words."
    ids = torch.tensor([[1, 5, 9, 200, 7, 3]])
    tr.model.eval()
    with torch.no_grad():
        assert torch.equal(policy.model(ids).logits, tr.model(ids).logits)
    # the run's last evaluation, replayed by the loaded policy (same tasks, seeds and turn limit)
    logged = read_jsonl(Path(cfg.run_dir) / "eval" / "update_0001.jsonl")
    with EnvPool(cfg.env.id, num_envs=2, backend="inline") as pool:
        again = collect(
            pool,
            policy,
            run_task_ids(cfg)[1][:2],
            group_size=1,
            seed=cfg.seed + 100_003,
            max_turns=cfg.env.max_turns,
        )
    seen = [[(s.prompt_ids, s.completion_ids) for s in t.steps] for t in logged]
    assert seen[0][0][0] and [[(s.prompt_ids, s.completion_ids) for s in t.steps] for t in again] == seen
    if lora == "true":  # the adapter moved in training, so equal logits are not the base model's
        base = load_policy("hf:tiny", device="cpu", dtype=cfg.model.dtype, seed=cfg.seed)
        with torch.no_grad():
            assert not torch.equal(base.model(ids).logits, tr.model(ids).logits)
    # a new run can start from it (the adapter merged into the weights it trains on)
    follow = train(
        cfg_for(
            tmp_path,
            f"model.name={folder}",
            "rl.updates=1",
            "eval.at_start=false",
            "eval.episodes=1",
            "tensorboard=false",
            name="follow",
        ),
        log=lambda _: None,
    )
    assert not any("base_layer.base_layer" in n for n, _ in follow.model.named_parameters())
    # the CLI, in a process of its own (so on an env registered with turngym itself)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "turngym",
            "eval",
            "turngym/Household-Easy-v0",
            "--policy",
            f"hf:{folder}",
            "--episodes",
            "1",
            "--model-kwargs",
            "device=cpu,max_new_tokens=4",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("lora", ["true", "false"])
def test_kl_reference_is_the_policy_as_rl_starts(tmp_path, lora):
    """The KL holds RL near the policy SFT made (not the model before SFT), and a resumed run
    keeps that reference."""
    from turngym.agents.engine.scoring import score_completions
    from turngym.trainers.loop import REFERENCE_FILE, train
    from turngym.trainers.update import reference_weights, score

    def reference_score(tr):
        with reference_weights(tr):
            return score(tr, prompt, completion, with_grad=False).logprobs

    extra = (
        "sft.episodes=2",
        "sft.lr=1e-2",
        "rl.updates=2",
        "rl.kl_coef=0.1",
        "eval.every=0",
        f"model.lora={lora}",
        "tensorboard=false",
    )
    tr = train(cfg_for(tmp_path, *extra), log=lambda _: None, stop_after=0)  # SFT done, RL about to start
    params = dict(tr.model.named_parameters())
    assert tr.reference and all(torch.equal(t, params[n]) for n, t in tr.reference.items())
    prompt, completion = [[1, 2, 3, 4]], [[5, 6, 7]]
    policy = score(tr, prompt, completion, with_grad=False).logprobs
    assert torch.equal(reference_score(tr), policy)
    if lora == "true":  # SFT moved the adapters: the base model is not the reference
        with tr.model.disable_adapter(), torch.no_grad():
            base = score_completions(tr.model.get_base_model(), prompt, completion).logprobs
        assert not torch.allclose(base, policy, atol=1e-4)
    assert (tmp_path / "run" / "checkpoints" / "update_0000" / REFERENCE_FILE).exists()

    resumed = train(cfg_for(tmp_path, *extra), log=lambda _: None)
    assert all(torch.equal(t, resumed.reference[n]) for n, t in tr.reference.items())
    after = score(resumed, prompt, completion, with_grad=False).logprobs
    assert torch.equal(reference_score(resumed), policy)
    assert not torch.equal(after, policy)  # RL moved the policy; the reference stayed
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["update"] for r in rows] == [0, 1, 2] and all(r["loss/kl"] >= 0 for r in rows[1:])


@pytest.mark.slow
def test_the_kl_with_top_layer_lora_replays_the_frozen_layers_and_trains_the_same(tmp_path, monkeypatch):
    """With LoRA on the top layer only, each micro-batch's reference pass records the frozen
    bottom layer and the policy's pass replays it: the run equals one whose reference scores every
    turn in a pass of its own, up to float rounding (other batch shapes)."""
    from turngym.agents.engine import frozen_layers
    from turngym.trainers import update
    from turngym.trainers.loop import train

    extra = (
        "rl.updates=2",
        "rl.kl_coef=0.1",
        "rl.minibatch_size=4",
        "rl.micro_batch_size=2",
        "model.lora_layers=1",
        "eval.every=0",
        "tensorboard=false",
    )
    replayed = []
    real = update.score_after_reference
    monkeypatch.setattr(update, "score_after_reference", lambda *a: replayed.append(1) or real(*a))
    runs = [train(cfg_for(tmp_path, *extra, name="replay"), log=lambda _: None)]
    assert replayed  # the micro-batches went through the replaying path
    monkeypatch.setattr(frozen_layers, "frozen_depth", lambda model: 0)  # as with full fine-tuning
    replayed.clear()
    runs.append(train(cfg_for(tmp_path, *extra, name="prepass"), log=lambda _: None))
    assert not replayed
    rows = [read_metrics(tmp_path / name / "metrics.jsonl") for name in ("replay", "prepass")]
    for a, b in zip(*rows):
        for key in ("loss/kl", "loss/policy"):
            if key in a:
                assert a[key] == pytest.approx(b[key], rel=1e-3, abs=1e-6)
    params = [dict(tr.model.named_parameters()) for tr in runs]
    trained = [n for n, p in params[0].items() if p.requires_grad]
    assert trained and all(torch.allclose(params[0][n], params[1][n], atol=1e-5) for n in trained)


@pytest.mark.slow
def test_a_checkpoint_without_its_kl_reference_is_refused(tmp_path):
    from turngym.trainers.loop import REFERENCE_FILE, train

    extra = ("rl.updates=2", "rl.kl_coef=0.1", "eval.every=0", "tensorboard=false")
    train(cfg_for(tmp_path, *extra), log=lambda _: None, stop_after=1)
    (tmp_path / "run" / "checkpoints" / "update_0001" / REFERENCE_FILE).unlink()
    with pytest.raises(ValueError, match=r"^rl\.kl_coef: checkpoint .* holds no KL reference"):
        train(cfg_for(tmp_path, *extra), log=lambda _: None)


def test_lora_layers_adapts_only_the_top_layers_and_trains(tmp_path):
    from turngym.trainers.setup import build_trainer

    tr = build_trainer(cfg_for(tmp_path, "model.lora_layers=1"), log=lambda _: None)
    adapted = {n.split(".layers.")[1].split(".")[0] for n, p in tr.model.named_parameters() if p.requires_grad}
    assert adapted == {str(tr.model.config.num_hidden_layers - 1)}
    with torch.no_grad():
        for name, p in tr.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05)
    from turngym.trainers.update import score

    score(tr, [[1, 2, 3, 4]], [[5, 6, 7]], with_grad=True).logprobs.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in tr.model.parameters() if p.requires_grad)


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "gigpo", "hgpo", "graph", "turn_gae", "hiper"])
@pytest.mark.slow
def test_every_estimator_trains(tmp_path, estimator):
    """One update moves the policy the way the estimator's advantages point: on the update's own
    turns, log-probs rise where the advantage is positive and fall where it is negative."""
    from turngym.trainers.loop import train
    from turngym.trainers.samples import loss_rows
    from turngym.trainers.setup import build_trainer
    from turngym.trainers.update import score

    extra = ["model.lora=false"] if estimator == "rloo" else []  # full fine-tuning path too
    # one optimizer step over the whole update (a minibatch larger than its turns): a step down
    # the gradient of the batch's surrogate, whose first-order gain is sum_k A_k (logp'_k - logp_k).
    # Two-token replies and groups of 4: with 4 tokens nearly every reply has an 'e' (the shaped
    # reward), every group ties and the advantages are all 0.
    cfg = cfg_for(
        tmp_path,
        "rl.updates=1",
        "rl.minibatch_size=64",
        "generation.max_new_tokens=2",
        "rl.group_size=4",
        "eval.at_start=false",
        "eval.episodes=1",
        "save_rollouts=true",
        f"rl.estimator={estimator}",
        "checkpoint_every=0",
        "tensorboard=false",
        *extra,
    )
    start = build_trainer(cfg, log=lambda _: None)  # same seed: the weights train() starts from
    trained = train(cfg, log=lambda _: None)
    rows = read_metrics(Path(cfg.run_dir) / "metrics.jsonl")
    assert rows[-1]["update"] == 1 and rows[-1]["policy/completion_tokens"] > 0
    if estimator in ("turn_gae", "hiper"):
        assert "loss/value" in rows[-1]
    trajs = read_jsonl(Path(cfg.run_dir) / "rollouts" / "update_0001.jsonl")
    assert all(s.advantage is not None for t in trajs for s in t.steps)
    # the token advantages the update used (the value head is still at its start here too)
    samples = loss_rows(start, trajs)
    prompts, completions = [s.prompt_ids for s in samples], [s.completion_ids for s in samples]
    before = score(start, prompts, completions, with_grad=False)
    after = score(trained, prompts, completions, with_grad=False)
    width = before.logprobs.shape[1]
    adv = torch.tensor([s.advantages + [0.0] * (width - len(s.advantages)) for s in samples])
    change = (after.logprobs - before.logprobs) * before.mask
    assert (adv != 0).any() and change.abs().sum() > 0
    assert (adv * change).sum() > 0
    assert change[adv > 0].mean() > 0
    if (adv < 0).any():  # with V = 0 and rewards >= 0, hiper's advantages are never negative
        assert change[adv < 0].mean() < 0


def test_hiper_rows_give_subgoal_and_switch_tokens_their_own_advantage(tmp_path):
    """samples.loss_rows on hand-made HiPER turns: span tokens get the span's advantage,
    value targets fill both outputs (V_hi weighted on segment starts), unscorable rollouts no rows."""
    from turngym.core.records import Step, Trajectory
    from turngym.trainers.samples import estimate_advantages, loss_rows, write_advantages
    from turngym.trainers.setup import build_trainer

    tr = build_trainer(
        cfg_for(tmp_path, "rl.estimator=hiper", "rl.estimator_args={gamma: 0.5, lam: 1.0}"),
        log=lambda _: None,
    )
    assert tr.estimator.name == "hiper" and tr.value_head is not None
    assert tr.policy.prompt.action_format == "tags" and "<switch>" in tr.policy.prompt.env_prompts[""]

    def rollout(switches, rewards, scorable=True):
        steps = []
        for t, (sw, r) in enumerate(zip(switches, rewards)):
            ids = tr.policy.encode_text(f"<switch>{sw}</switch><subgoal>go</subgoal><action>inc</action>")
            text = tr.tokenizer.decode(ids, skip_special_tokens=True)
            steps.append(
                Step(
                    turn=t,
                    observation="",
                    action="inc",
                    reply=text,
                    reward=r,
                    terminated=t == len(rewards) - 1,
                    state_key=str(t),
                    info={"state_key": str(t + 1)},
                    prompt_ids=[1, 2, 3 + t],
                    completion_ids=ids,
                    spans=parse_spans(text),
                )
            )
        return Trajectory(env_id="x", task_id="t", seed=0, group_id="g", steps=steps, scorable=scorable)

    trajs = [
        rollout(["SWITCH", "KEEP", "SWITCH"], [0, 0, 1]),
        rollout(["KEEP", "SWITCH"], [0, 1], scorable=False),
    ]
    out = estimate_advantages(tr, trajs)
    samples = loss_rows(tr, trajs, out)
    assert all(s.advantage is None for t in trajs for s in t.steps)  # rows only: the records stay
    write_advantages(tr, trajs, out)
    assert len(samples) == 3 and all(s.advantage == 0 for s in trajs[1].steps)  # no rows, no credit
    # zero-init value head (V = 0), gamma 0.5, lam 1, segments [0, 1] and [2]: A_lo(t) = r_t, and
    # A_hi(segment 1) = delta_1 + gamma^2 * lam * A_hi(segment 2) = 0 + 0.25 * 1 on its first turn
    a_lo, a_hi = [0.0, 0.0, 1.0], [0.25, None, 1.0]  # None: a KEEP turn, its span tokens get A_lo
    assert [s.advantage for s in trajs[0].steps] == pytest.approx(a_lo)
    for t, (sample, step) in enumerate(zip(samples, trajs[0].steps)):
        text = tr.tokenizer.decode(step.completion_ids, skip_special_tokens=True)
        offsets = token_offsets(tr.tokenizer, step.completion_ids)
        inside = [
            any(token_span_mask(offsets, step.spans[n])[k] for n in ("switch", "subgoal")) for k in range(len(offsets))
        ]
        high = a_hi[t] if a_hi[t] is not None else a_lo[t]
        assert any(inside) and "<action>inc</action>" in text
        assert sample.advantages == pytest.approx([high if x else a_lo[t] for x in inside])
        assert sample.value_weights == (1.0, 1.0 if t != 1 else 0.0)
        assert sample.value_targets[0] == pytest.approx(a_lo[t])


@pytest.mark.slow
def test_resume_after_kill_matches_an_uninterrupted_run(tmp_path):
    """Kill `turngym train` with SIGKILL after it has logged update 2 of 4, resume, compare."""
    from turngym.trainers.loop import train

    extra = [
        "rl.updates=4",
        "eval.every=2",
        "sft.episodes=2",
        "sft.batch_size=4",
        "rl.estimator=gigpo",
        "rl.kl_coef=0.05",  # the KL's reference (the policy after SFT) is resumed too
        "model.lora_layers=1",  # as the demo: adapters on the top layer, the bottom one replayed
        "rl.lr_schedule=linear",
    ]  # the resumed updates get the learning rate of their number
    straight = cfg_for(tmp_path, *extra, name="straight")
    train(straight, log=lambda _: None)
    expected = comparable(read_metrics(Path(straight.run_dir) / "metrics.jsonl"))
    assert [r["update"] for r in expected] == [0, 1, 2, 3, 4]
    assert [r["policy/lr"] for r in expected[1:]] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])

    killed = cfg_for(tmp_path, *extra, name="killed")
    config_file = tmp_path / "killed.yaml"
    config_file.write_text(json.dumps(killed.to_dict()))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "support"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turngym",
            "train",
            "--config",
            str(config_file),
            "--env-module",
            "trainer_envs",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    metrics = Path(killed.run_dir) / "metrics.jsonl"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if any(r.get("update") == 2 for r in read_metrics(metrics)):
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    saved = sorted(p.name for p in (Path(killed.run_dir) / "checkpoints").glob("update_*"))
    assert saved and saved[-1] < "update_0004", saved

    torch.set_num_threads(1)
    logs: list[str] = []
    train(killed, log=logs.append)
    assert any(line.startswith("resumed from") for line in logs)
    assert comparable(read_metrics(metrics)) == expected


def test_cli_train_errors_name_the_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[rl]\nestimator = 'gigpo'\ngroup_sise = 4\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-m", "turngym", "train", "--config", str(bad)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "rl.group_sise: unknown field" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "turngym", "train", "--dry-run", "rl.estimator=hgpo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "estimator: hgpo" in out.stdout


@pytest.mark.slow
def test_text_only_rollouts_are_retokenized_and_rescored(tmp_path):
    """A remote server (vLLM, any OpenAI-compatible API) may return text only: the trainer
    re-tokenizes the replies with its own chat template and recomputes the old log-probs."""
    from turngym.agents.hf import HFPolicy
    from turngym.agents.models import load_model
    from turngym.trainers.loop import train

    model, tokenizer = load_model("tiny", seed=1)
    server = HFPolicy(model, tokenizer, max_new_tokens=4)

    class TextOnly:  # reply and action, no token data (an OpenAI-compatible server without token ids)
        def act(self, conversations):
            return [Completion(reply=c.reply, action=c.action) for c in server.act(conversations)]

    cfg = cfg_for(
        tmp_path,
        "rl.updates=1",
        "eval.at_start=false",
        "eval.episodes=1",
        "checkpoint_every=0",
        "tensorboard=false",
    )
    train(cfg, log=lambda _: None, rollout_policy=TextOnly())
    row = read_metrics(Path(cfg.run_dir) / "metrics.jsonl")[-1]
    assert row["policy/retokenized_steps"] > 0 and row["policy/completion_tokens"] > 0
    assert np.isfinite(row["loss/policy"]) and row["policy/grad_norm"] > 0
    step = read_jsonl(Path(cfg.run_dir) / "rollouts" / "update_0001.jsonl")[0].steps[0]
    assert step.prompt_ids and step.completion_ids[-1] == tokenizer.eos_token_id and not step.logprobs


@pytest.mark.slow
def test_demo_runs_end_to_end_on_the_tiny_model(tmp_path, capfd):
    """`turngym demo` wiring (the real demo uses SmolLM2-135M and takes minutes; see docs), at
    its default of two processes: ``run`` starts them from the parsed arguments, rank 0 prints."""
    import argparse

    from turngym import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args(
        [
            "--model",
            "tiny",
            "--run-dir",
            str(tmp_path / "demo"),
            "--sft-episodes",
            "2",
            "--eval-episodes",
            "2",
            "--max-turns",
            "2",
            "--group-size",
            "2",
            "--tasks-per-update",
            "2",
            "--no-progress",
            "--zero-shot",
            "--updates",
            "4",
            "--eval-every",
            "2",
            "--curve-episodes",
            "1",
        ]
    )
    assert demo.run(args) == 0
    out = capfd.readouterr().out
    assert out.count("Held-out tasks") == 1
    assert "compute: bfloat16 (this CPU computes it natively)" in out or "compute: float32: this CPU has no" in out
    assert "zero-shot" in out and "after SFT" in out and "GiGPO updates" in out and "curves.png" in out
    assert "95% CI" in out and "held-out success during RL: update 2: " in out and "(1 ep.), update 4: " in out
    assert "Task by task (the same 2 episodes): RL solved" in out and "exact sign test" in out
    assert "falls short of the demo's target" in out or "target is met" in out or "less than the demo's" in out
    assert (tmp_path / "demo" / "curves.png").exists()
    assert (tmp_path / "demo" / "eval" / "zero_shot.jsonl").exists()
    # the evaluations during RL play a prefix of the held-out list; the last one all of it
    assert len(read_jsonl(tmp_path / "demo" / "eval" / "update_0002.jsonl")) == 1
    assert len(read_jsonl(tmp_path / "demo" / "eval" / "update_0004.jsonl")) == 2


def test_demo_verdict_says_plainly_whether_the_target_was_met():
    from turngym.core.stats import sign_test
    from turngym.demo import verdict

    sft, rl = {"success_rate": 0.2}, {"success_rate": 0.35}
    assert "target is met" in verdict(sft, rl, (22, 2, 134))
    assert sign_test(22, 2) < 0.05
    assert "not beyond noise" in verdict(sft, rl, (6, 1, 50))
    # a miss says how often a real gain of the target's size would pass (seed 0: +18/-10 of 134)
    assert "truly gains +0.10 passes this test in 67% of runs" in verdict(sft, {"success_rate": 0.33}, (18, 10, 134))
    assert "truly gains" not in verdict(sft, rl, (22, 2, 134))  # met: nothing to qualify
    assert "did not improve" in verdict(sft, {"success_rate": 0.2}, (2, 2, 134))
    assert "less than the demo's target" in verdict(sft, {"success_rate": 0.26}, (9, 0, 134))
    # seed 3 of the demo: 0.38 -> 0.13, +6/-40
    assert "made the agent worse" in verdict(sft, {"success_rate": 0.13}, (6, 40, 134))
    assert "evaluation is missing" in verdict(sft, rl, None)
    # the exact two-sided binomial test: 7 of 7 one way
    assert abs(sign_test(7, 0) - 2 / 2**7) < 1e-12 and sign_test(0, 0) == 1.0


def test_demo_without_rl_updates_says_so(tmp_path, capsys):
    """--updates 0: the table has no RL row and the demo does not compare SFT with zero-shot as if it were RL."""
    import argparse

    from turngym import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args(
        [
            "--model",
            "tiny",
            "--run-dir",
            str(tmp_path / "demo"),
            "--updates",
            "0",
            "--sft-episodes",
            "2",
            "--eval-episodes",
            "2",
            "--max-turns",
            "2",
            "--no-progress",
            "--processes",
            "1",
        ]
    )
    assert demo.run(args) == 0
    out = capsys.readouterr().out
    assert "after SFT" in out and "+ 0 GiGPO updates" not in out
    assert "No RL updates were run" in out and "RL did not improve" not in out and "Task by task" not in out
    assert "zero-shot" not in out and not (tmp_path / "demo" / "eval" / "zero_shot.jsonl").exists()


def test_the_printed_evaluation_command_replays_the_demos_last_evaluation(tmp_path, capsys):
    """The `turngym eval` command the demo prints for its trained policy plays the demo's last
    evaluation again, action for action (one process: the same batches; docs/training.md)."""
    import argparse
    import shlex

    from turngym import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    run_dir = tmp_path / "demo"
    args = parser.parse_args(
        [
            "--model",
            "tiny",
            "--run-dir",
            str(run_dir),
            "--updates",
            "2",
            "--sft-episodes",
            "2",
            "--eval-episodes",
            "4",
            "--max-turns",
            "2",
            "--group-size",
            "2",
            "--no-progress",
            "--processes",
            "1",
        ]
    )
    assert demo.run(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("trained policy:"))
    command = shlex.split(line.split("again: ", 1)[1].rstrip(")"))
    assert command[:2] == ["turngym", "eval"] and "--backend" in command
    out = tmp_path / "again.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "turngym", *command[1:], "--out", str(out)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    played = {t.task_id: t for t in read_jsonl(run_dir / "eval" / "update_0002.jsonl")}
    again = read_jsonl(out)
    assert sorted(t.task_id for t in again) == sorted(played)
    for t in again:
        assert [s.action for s in t.steps] == [s.action for s in played[t.task_id].steps]
        assert t.success == played[t.task_id].success


@pytest.mark.slow
def test_two_processes_average_gradients(tmp_path):
    """Data-parallel training as `accelerate launch` / torchrun start it: 2 CPU processes (gloo)."""
    cfg = cfg_for(tmp_path, "rl.updates=1", "eval.at_start=false", "eval.episodes=1", "tensorboard=false", name="ddp")
    torchrun_train(tmp_path, cfg)
    rows = read_metrics(Path(cfg.run_dir) / "metrics.jsonl")
    assert [r["update"] for r in rows] == [0, 1] and rows[-1]["processes"] == 2
    assert rows[-1]["policy/grad_norm"] > 0
    # the update's metrics and saved rollouts cover both processes' episodes (2 x 2 tasks x 2 rollouts)
    assert rows[-1]["episodes"] == rows[-1]["train/episodes"] == 8 and rows[-1]["train/groups"] == 4
    assert len((Path(cfg.run_dir) / "rollouts" / "update_0001.jsonl").read_text().splitlines()) == 8
    assert (Path(cfg.run_dir) / "checkpoints" / "update_0001" / "weights.pt").exists()


@pytest.mark.slow
def test_two_processes_resume_exactly(tmp_path):
    """A data-parallel run stopped after update 1 and resumed gives the uninterrupted run's
    updates 2 and 3: the checkpoint keeps every process's sampling stream, not only rank 0's."""
    settings = [
        "eval.at_start=false",
        "eval.episodes=2",
        "eval.every=1",
        "tensorboard=false",
        "checkpoint_every=1",
        "resume=true",
    ]
    torchrun_train(tmp_path, cfg_for(tmp_path, "rl.updates=3", *settings, name="whole"))
    torchrun_train(tmp_path, cfg_for(tmp_path, "rl.updates=1", *settings, name="parts"))
    torchrun_train(tmp_path, cfg_for(tmp_path, "rl.updates=3", *settings, name="parts"))
    whole = comparable(read_metrics(tmp_path / "whole" / "metrics.jsonl"))
    parts = comparable(read_metrics(tmp_path / "parts" / "metrics.jsonl"))
    assert [r["update"] for r in parts] == [0, 1, 2, 3] and parts[-1]["processes"] == 2
    assert parts == whole
    assert (tmp_path / "parts" / "checkpoints" / "update_0003" / "rng_processes.pt").exists()
    # resumed by another number of processes: fresh streams, said plainly, not an IndexError
    out = torchrun_train(tmp_path, cfg_for(tmp_path, "rl.updates=4", *settings, name="parts"), processes=3)
    assert "written by 2 processes, this run has 3" in out
    assert [r["update"] for r in read_metrics(tmp_path / "parts" / "metrics.jsonl")] == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_demo_in_two_processes_matches_one(tmp_path):
    """`turngym demo --processes 2`: SFT's batches and every evaluation's episodes are split
    between the processes, so SFT's losses (the first is the whole batch's, before any step) and
    the held-out episodes (same tasks, same seeds, greedy) match a one-process run's."""
    args = [
        "--model",
        "tiny",
        "--sft-episodes",
        "4",
        "--eval-episodes",
        "5",
        "--max-turns",
        "2",
        "--group-size",
        "2",
        "--tasks-per-update",
        "2",
        "--no-progress",
        "--zero-shot",
        "--updates",
        "2",
        "--eval-every",
        "2",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    runs = {}
    for n in (1, 2):
        run_dir = tmp_path / f"p{n}"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "turngym",
                "demo",
                *args,
                "--processes",
                str(n),
                "--run-dir",
                str(run_dir),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.count("Held-out tasks") == 1  # rank 0 alone reports
        runs[n] = run_dir
    one, two = (read_metrics(runs[n] / "metrics.jsonl") for n in (1, 2))
    assert two[-1]["processes"] == 2 and "processes" not in one[-1]
    assert two[0]["sft/loss_first"] == pytest.approx(one[0]["sft/loss_first"], rel=1e-5)
    assert two[0]["sft/loss_last"] == pytest.approx(one[0]["sft/loss_last"], rel=1e-3)

    def episodes(run_dir, name):
        return [(t.task_id, t.seed, [s.action for s in t.steps]) for t in read_jsonl(run_dir / "eval" / name)]

    for name in ("zero_shot.jsonl", "update_0000.jsonl"):
        assert len(episodes(runs[2], name)) == 5 and episodes(runs[2], name) == episodes(runs[1], name)
    assert [t for t, _, _ in episodes(runs[2], "update_0002.jsonl")] == [
        t for t, _, _ in episodes(runs[1], "update_0002.jsonl")
    ]


def test_wilson_interval():
    from turngym.core.stats import wilson

    low, high = wilson(10, 50)
    assert 0.11 < low < 0.12 and 0.33 < high < 0.34  # 0.2 of 50: [0.112, 0.330]
    assert wilson(0, 50)[0] == 0.0 and wilson(50, 50)[1] == 1.0


def test_demo_pairs_the_evaluations_task_by_task(tmp_path):
    from turngym.core.records import Step, Trajectory, write_jsonl
    from turngym.core.stats import paired_outcomes, sign_test

    def episodes(name, outcomes, tasks="abcde"):
        write_jsonl(
            tmp_path / "eval" / name,
            [Trajectory("e", t, 0, [Step(0, "", "a")], success=ok) for t, ok in zip(tasks, outcomes)],
            append=False,
        )

    before, after = tmp_path / "eval" / "update_0000.jsonl", tmp_path / "eval" / "update_0008.jsonl"
    episodes("update_0000.jsonl", [True, False, False, True, False])
    episodes("update_0008.jsonl", [True, True, True, False, False])
    assert paired_outcomes(before, after) == (2, 1, 5)
    assert paired_outcomes(before, tmp_path / "eval" / "update_0003.jsonl") is None  # no file
    episodes("update_0008.jsonl", [True] * 5, tasks="edcba")
    assert paired_outcomes(before, after) is None  # other episodes: nothing to pair
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert sign_test(5, 1) == pytest.approx(2 * 7 / 64)  # P(X <= 1), X ~ Bin(6, 1/2), both tails
    assert sign_test(0, 6) == sign_test(6, 0) == pytest.approx(2 / 64)


def test_sign_test_power_is_exact():
    from turngym.core.stats import sign_test, sign_test_power

    # with no true gain the test passes (RL ahead) at most alpha / 2 of the time
    assert 0 < sign_test_power(134, 0.25, 0.0) <= 0.025
    # two tasks, both change: only a 2-0 split could pass, and its p is 0.5: never
    assert sign_test_power(2, 1.0, 1.0) == 0.0
    # six tasks that all change and always go RL's way: 6-0, p = 2 / 64 < 0.05, always
    assert sign_test(6, 0) < 0.05 and sign_test_power(6, 1.0, 1.0) == pytest.approx(1.0)
    # the README's figures: 134 tasks, a true gain of 0.10
    assert round(sign_test_power(134, 0.20, 0.10), 2) == 0.69 and round(sign_test_power(134, 0.35, 0.10), 2) == 0.45
    with pytest.raises(ValueError, match="gain <= changed"):
        sign_test_power(134, 0.1, 0.2)


def test_curves_put_every_evaluation_at_its_stage():
    from turngym.viewer.curves import eval_points

    rows = [
        {"update": 0, "eval/success_rate": 0.0, "sft/turns": 40, "eval_after_sft/success_rate": 0.2},
        {"update": 1, "train/success_rate": 0.1},
        {"update": 2, "train/success_rate": 0.2, "eval/success_rate": 0.4},
    ]
    assert eval_points(rows, "success_rate") == [
        (-1.0, 0.0, "zero-shot"),
        (0.0, 0.2, "after sft"),
        (2.0, 0.4, "rl"),
    ]
    no_sft = [{"update": 0, "eval/success_rate": 0.1}, {"update": 3, "eval/success_rate": 0.3}]
    assert [x for x, _, _ in eval_points(no_sft, "success_rate")] == [0.0, 3.0]


def test_one_summary_two_shapes():
    """``turngym eval`` prints ``summarize``; metrics.jsonl logs ``summary_row`` (episodes counts
    the scorable ones, and an all-unscorable batch logs only that 0)."""
    from turngym.core.records import Step, Trajectory
    from turngym.core.runs import summarize, summary_row

    def traj(ret, success, steps, scorable=True):
        return Trajectory(
            "e",
            "t",
            0,
            steps=[Step(i, "o", "a") for i in range(steps)],
            episode_return=ret,
            success=success,
            scorable=scorable,
        )

    batch = [traj(1.0, True, 2), traj(0.5, False, 4), traj(0.0, False, 9, scorable=False)]
    assert summarize(batch) == {
        "episodes": 3,
        "unscorable": 1,
        "success_rate": 0.5,
        "mean_return": 0.75,
        "mean_steps": 3.0,
    }
    # the report summarizes the viewer's episode rows with the same function
    rows = [
        {"scorable": t.scorable, "success": t.success, "episode_return": t.episode_return, "length": t.length}
        for t in batch
    ]
    assert summarize(rows) == summarize(batch)
    assert summarize(rows[2:], empty=None)["mean_steps"] is None
    assert list(summary_row(batch, "eval").items()) == [
        ("eval/success_rate", 0.5),
        ("eval/mean_return", 0.75),
        ("eval/mean_steps", 3.0),
        ("eval/episodes", 2),
        ("eval/unscorable", 1),
    ]
    failed = [traj(0.0, False, 1, scorable=False)]
    assert summarize(failed) == {
        "episodes": 1,
        "unscorable": 1,
        "success_rate": 0.0,
        "mean_return": 0.0,
        "mean_steps": 0.0,
    }
    assert summary_row(failed, "train") == {"train/episodes": 0}


@pytest.mark.slow
def test_a_run_killed_after_sft_resumes_without_redoing_it(tmp_path, monkeypatch):
    from turngym.trainers import loop

    cfg = cfg_for(tmp_path, "sft.episodes=2", "rl.updates=1", "eval.at_start=true", "tensorboard=false")
    real_evaluate, calls = loop.evaluate, []

    def killed_in_second_eval(tr, pool, ids, update, name=None):
        calls.append(update)
        if len(calls) == 2:  # the evaluation after SFT
            raise KeyboardInterrupt
        return real_evaluate(tr, pool, ids, update, name)

    monkeypatch.setattr(loop, "evaluate", killed_in_second_eval)
    with pytest.raises(KeyboardInterrupt):
        loop.train(cfg, log=lambda _: None)
    monkeypatch.setattr(loop, "evaluate", real_evaluate)
    monkeypatch.setattr(loop, "run_sft", lambda *a: pytest.fail("SFT ran again after resuming"))
    loop.train(
        load_config(
            None,
            [
                *BASE,
                f"run_dir={cfg.run_dir}",
                "sft.episodes=2",
                "rl.updates=1",
                "eval.at_start=true",
                "tensorboard=false",
            ],
        ),
        log=lambda _: None,
    )
    rows = read_metrics(Path(cfg.run_dir) / "metrics.jsonl")
    assert [r["update"] for r in rows] == [0, 1]
    assert rows[0]["sft/turns"] > 0 and "eval/success_rate" in rows[0] and "eval_after_sft/success_rate" in rows[0]


def test_retokenized_replies_end_with_eos_only_where_they_ended():
    """A remote reply cut at its token limit ("length") gets no end-of-turn token: the model did
    not end it, so training must not teach it to."""
    from turngym.agents.hf import HFPolicy
    from turngym.agents.models import load_model
    from turngym.core.records import Step, Trajectory
    from turngym.trainers.rollout import attach_tokens

    model, tokenizer = load_model("tiny")
    policy = HFPolicy(model, tokenizer)
    steps = [
        Step(0, "obs", "go", reply="go north", finish_reason="stop"),
        Step(1, "obs", "go", reply="go north and then", finish_reason="length"),
    ]
    traj = Trajectory(
        "turngym-tests/Counter-v0",
        "counter-1",
        0,
        steps,
        initial_observation="obs",
        initial_info={"messages": [{"role": "user", "content": "obs"}]},
    )
    assert attach_tokens(policy, [traj]) == 2
    assert steps[0].completion_ids[-1] == tokenizer.eos_token_id
    assert steps[1].completion_ids[-1] != tokenizer.eos_token_id
    assert steps[1].completion_ids == policy.encode_text("go north and then")


def test_run_state_reads_and_writes_the_state_json_of_before():
    """``RunState`` is state.json key for key and in the same order as the dict it replaced, and
    a checkpoint written before a key existed resumes with the fresh run's value for it."""
    from turngym.trainers.state import RunState

    before = {
        "update": 3,
        "env_steps": 40,
        "episodes": 12,
        "task_order": ["b", "a"],
        "task_cursor": 1,
        "phase": "rl",
        "start_row": None,
    }
    state = RunState.from_dict(before)
    assert json.dumps(state.to_dict()) == json.dumps(before)
    assert RunState.from_dict({"update": 2, "env_steps": 9, "episodes": 4}) == RunState(
        update=2, env_steps=9, episodes=4
    )
    assert state.update == 3 and state.phase == "rl"
