"""Asynchronous rollouts (rl.max_lag): the importance-weight math, the config field, and short
real runs on the tiny model (lag 0 is the synchronous path; lag 1 and 2 keep to their lag, repeat
for a seed, and resume exactly)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import trainer_envs  # noqa: E402,F401  (registers the shaped counter)
from policy_models import one_torch_thread  # noqa: E402
from trainer_runs import comparable, train_run  # noqa: E402

from turngym.core.records import read_jsonl  # noqa: E402
from turngym.trainers.config import describe, load_config  # noqa: E402
from turngym.trainers.losses import clipped_policy_loss, truncated_is_weight  # noqa: E402

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
    "rl.lr=1e-2",
    "eval.episodes=2",
    "eval.every=2",
    "progress=false",
    "generation.max_new_tokens=4",
    "model.lora_rank=4",
    "sft.episodes=2",
    "sft.batch_size=4",
    "rl.estimator=gigpo",
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def run(tmp_path, name: str, *extra: str, stop_after: int | None = None) -> list[dict]:
    return train_run(tmp_path / name, [*BASE, *extra], stop_after)


# ----- the correction --------------------------------------------------------------------------


def test_importance_weight_is_one_when_behaviour_is_the_proximal_policy():
    prox = torch.tensor([[-0.5, -1.2, -3.0]])
    w = truncated_is_weight(prox, prox.clone(), cap=2.0)
    assert torch.equal(w, torch.ones_like(prox))
    logp = torch.tensor([[-0.4, -1.5, -2.0]], requires_grad=True)
    adv, mask = torch.tensor([[1.0, -2.0, 0.5]]), torch.ones(1, 3)
    plain, plain_clip = clipped_policy_loss(logp, prox, adv, mask, 3.0)
    weighted, weighted_clip = clipped_policy_loss(logp, prox, adv, mask, 3.0, weights=w)
    assert torch.equal(plain, weighted) and torch.equal(plain_clip, weighted_clip)


def test_importance_weight_is_the_ratio_truncated_at_the_cap():
    behaviour = torch.tensor([[-1.0, -1.0, -1.0]])
    prox = behaviour + torch.tensor([[math.log(0.5), math.log(1.5), math.log(5.0)]])
    w = truncated_is_weight(prox, behaviour, cap=2.0)
    assert w.tolist()[0] == pytest.approx([0.5, 1.5, 2.0])
    assert not w.requires_grad
    # the loss weighs each token's clipped surrogate by w: by hand, ratio to the proximal policy
    logp = (prox + torch.tensor([[0.0, 0.5, -0.5]])).requires_grad_(True)
    adv, mask = torch.tensor([[1.0, 1.0, -1.0]]), torch.ones(1, 3)
    loss, clip_frac = clipped_policy_loss(logp, prox, adv, mask, 3.0, 0.2, 0.28, weights=w)
    ratio = [1.0, math.exp(0.5), math.exp(-0.5)]
    per_token = [-min(r * a, min(max(r, 0.8), 1.28) * a) for r, a in zip(ratio, [1.0, 1.0, -1.0])]
    assert loss.item() == pytest.approx(sum(x * y for x, y in zip([0.5, 1.5, 2.0], per_token)) / 3.0)
    assert clip_frac.item() == pytest.approx(2 / 3)  # tokens 2 and 3 are clipped
    loss.backward()
    assert logp.grad[0, 0].item() == pytest.approx(-0.5 * math.exp(0.0) / 3.0)  # w * d(-r A)/dlogp
    assert logp.grad[0, 1:].abs().sum().item() == 0.0  # the clip stops the gradient


# ----- the config field ------------------------------------------------------------------------


def test_max_lag_config_is_checked_and_listed():
    with pytest.raises(ValueError, match=r"^rl\.max_lag: must be >= 0, got -1$"):
        load_config(None, ["rl.max_lag=-1"])
    with pytest.raises(ValueError, match=r"^rl\.max_lag: expected int"):
        load_config(None, ["rl.max_lag=1.5"])
    with pytest.raises(ValueError, match=r"^rl\.max_lag: asynchronous rollouts generate in-process"):
        load_config(None, ["rl.max_lag=1", "generation.server_url=http://localhost:8000"])
    assert load_config(None, []).rl.max_lag == 0
    names = [row[0] for row in describe()]
    assert "rl.max_lag" in names and "rl.is_cap" in names


# ----- runs ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_lag_0_is_the_synchronous_path(tmp_path):
    plain = run(tmp_path, "plain", "rl.updates=2")
    lag0 = run(tmp_path, "lag0", "rl.updates=2", "rl.max_lag=0")
    assert comparable(lag0) == comparable(plain)
    assert not any(k.startswith(("rollout/", "policy/is_")) for r in lag0 for k in r)
    assert read_jsonl(tmp_path / "lag0" / "rollouts" / "update_0002.jsonl") == read_jsonl(
        tmp_path / "plain" / "rollouts" / "update_0002.jsonl"
    )


@pytest.mark.parametrize("lag", [1, 2])
@pytest.mark.slow
def test_lagged_runs_keep_to_the_lag_and_repeat_for_a_seed(tmp_path, lag):
    rows = run(tmp_path, "a", "rl.updates=5", f"rl.max_lag={lag}")
    assert [r["update"] for r in rows] == [0, 1, 2, 3, 4, 5]
    for r in rows[1:]:
        u = r["update"]
        # update u trains on the rollouts of the weights after update u - 1 - lag (0 at first)
        assert r["rollout/policy_lag"] == min(lag, u - 1) <= lag
        assert r["rollout/weights_version"] == max(0, u - 1 - lag)
        assert r["time/rollout_wait"] >= 0
    trained = [r for r in rows[1:] if r.get("loss/policy") is not None]
    assert trained and all(r["policy/is_weight"] > 0 for r in trained)
    # the weights did move between versions, so the correction was not a no-op
    assert any(r["policy/is_weight"] != 1.0 for r in trained if r["rollout/policy_lag"] > 0)
    assert "eval/success_rate" in rows[-1]
    again = run(tmp_path, "b", "rl.updates=5", f"rl.max_lag={lag}")
    assert comparable(again) == comparable(rows)
    for u in range(1, 6):
        name = f"update_{u:04d}.jsonl"
        assert read_jsonl(tmp_path / "b" / "rollouts" / name) == read_jsonl(tmp_path / "a" / "rollouts" / name)


@pytest.mark.slow
def test_lagged_run_resumes_exactly(tmp_path):
    straight = run(tmp_path, "straight", "rl.updates=5", "rl.max_lag=2")
    first = run(tmp_path, "resumed", "rl.updates=5", "rl.max_lag=2", stop_after=3)
    assert [r["update"] for r in first] == [0, 1, 2, 3]
    saved = tmp_path / "resumed" / "checkpoints" / "update_0003"
    assert (saved / "lag.pt").exists()
    lag_state = torch.load(saved / "lag.pt", weights_only=False)
    assert sorted(lag_state["weights"]) == [1, 2] and sorted(lag_state["tasks"]) == [4, 5]
    resumed = run(tmp_path, "resumed", "rl.updates=5", "rl.max_lag=2")
    assert comparable(resumed) == comparable(straight)


# ----- token-in/token-out through a server ----------------------------------------------------


@pytest.mark.parametrize("token_ids", [False, True])
def test_server_token_ids_asks_the_server_for_tokens_and_logprobs(tmp_path, token_ids):
    pytest.importorskip("openai")
    from turngym.trainers.setup import build_trainer

    cfg = load_config(
        None,
        [
            *BASE,
            f"run_dir={tmp_path}",
            "generation.server_url=http://127.0.0.1:9/v1",
            f"generation.server_token_ids={str(token_ids).lower()}",
        ],
    )
    tr = build_trainer(cfg, log=lambda _: None)
    try:
        assert tr.rollout_policy is not tr.policy
        assert tr.rollout_policy.token_ids is token_ids and tr.rollout_policy.logprobs is token_ids
    finally:
        tr.rollout_policy.close()


def test_a_failing_rollout_worker_stops_the_run_with_its_error(tmp_path, monkeypatch):
    from turngym.trainers import async_rollouts

    def broken(*args, **kwargs):
        raise OSError("env server gone")

    monkeypatch.setattr(async_rollouts, "collect", broken)
    with pytest.raises(RuntimeError, match=r"rollout worker failed on update 1: OSError\('env server gone'\)"):
        run(tmp_path, "broken", "rl.updates=3", "rl.max_lag=1", "sft.episodes=0", "eval.at_start=false")


def test_lag_refuses_a_separate_rollout_policy(tmp_path):
    from turngym.trainers.loop import train

    cfg = load_config(None, [*BASE, f"run_dir={tmp_path}", "rl.max_lag=1"])
    with pytest.raises(ValueError, match=r"^rl\.max_lag: asynchronous rollouts need in-process generation"):
        train(cfg, log=lambda _: None, rollout_policy=object())


@pytest.mark.parametrize("extra", [("model.lora=false", "rl.kl_coef=0.1"), ("rl.estimator=turn_gae",)])
@pytest.mark.slow
def test_lag_with_full_fine_tuning_kl_and_a_value_head(tmp_path, extra):
    rows = run(tmp_path, "run", "rl.updates=3", "rl.max_lag=1", "sft.episodes=0", *extra)
    assert [r["rollout/policy_lag"] for r in rows[1:]] == [0, 1, 1]
    trained = [r for r in rows[1:] if r.get("loss/policy") is not None]
    assert trained and all(math.isfinite(r["loss/policy"]) for r in trained)
