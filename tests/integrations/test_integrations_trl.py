"""TRL 1.16 GRPOTrainer with turngym envs: the multi-turn rollout_func and the environment_factory class,
run for real with the tiny model on CPU."""

from __future__ import annotations

import copy
import os

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from policy_models import one_torch_thread, tiny  # noqa: E402

from turngym.integrations.trl import (  # noqa: E402
    GRPORollout,
    cpu_grpo_options,
    env_reward_func,
    flatten_episode,
    task_dataset,
)
from turngym.integrations.trl_tools import environment_class  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
COUNTER = "turngym-tests/Counter-v0"


def _config(tmp_path, **overrides):
    from trl import GRPOConfig

    options = cpu_grpo_options(
        str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=160,
        temperature=1.0,
        learning_rate=1e-4,
        max_steps=2,
    )
    return GRPOConfig(**{**options, **overrides})


def _model():
    """A private copy: training must not change the cached tiny model other tests compare against."""
    model, tokenizer = tiny()
    model, tokenizer = copy.deepcopy(model), copy.deepcopy(tokenizer)
    tokenizer.padding_side = "left"
    return model, tokenizer


@pytest.mark.model
def test_grpo_trains_two_steps_on_multi_turn_episodes(tmp_path):
    from trl import GRPOTrainer

    model, tokenizer = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rollout = GRPORollout(COUNTER, num_envs=4, max_turns=3, max_new_tokens=12, seed=1)
    data = task_dataset(COUNTER, limit=4)
    assert data["prompt"][:2] == ["counter-1", "counter-11"]

    def longer_is_better(completions, env_turns, **kwargs):
        # the random tiny model never reaches a Counter target (env_reward is 0 for all), so this
        # extra reward gives the groups some spread; env_turns is a column the rollout passes
        return [len(text) / 100 + turns for text, turns in zip(completions, env_turns)]

    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=_config(tmp_path),
        train_dataset=data,
        reward_funcs=[env_reward_func, longer_is_better],
        rollout_func=rollout,
    )
    with one_torch_thread():
        trainer.train()
    rollout.close()
    assert trainer.state.global_step == 2, trainer.state.log_history
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters()), trainer.state.log_history
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in logged)
    # the last batch: 4 episodes of one task pair, each group sharing its start
    trajs = rollout.last_trajectories
    assert len(trajs) == 4 and trajs[0].initial_observation == trajs[1].initial_observation
    assert any(t.length > 1 for t in trajs)  # multi-turn: at least one episode took several turns


@pytest.mark.model
def test_flattened_episode_is_exactly_what_the_model_saw():
    """prompt + completion ids replay every turn's prompt, env tokens are masked, and the model's own
    log-probs of the flattened sequence equal the ones recorded while sampling."""
    from types import SimpleNamespace

    import turngym
    from turngym.agents.hf import HFPolicy
    from turngym.agents.prompts import PromptConfig

    model, tokenizer = _model()
    # the rollout function's own history: every turn exactly as shown, one sequence per episode
    policy = HFPolicy(model, tokenizer, max_new_tokens=10, seed=0, prompt=PromptConfig(history="transcript"))
    with one_torch_thread(), turngym.EnvPool(COUNTER, num_envs=2, backend="inline") as pool:
        trajs = pool.rollout(policy, ["counter-1", "counter-2"], group_size=1, max_turns=3)
    multi = [t for t in trajs if t.length > 1]
    assert multi, "the random tiny model should not end these episodes in one turn"
    for traj in multi:
        prompt, completion, logprobs, mask = flatten_episode(traj)
        assert "flatten_cut_at_turn" not in traj.metadata
        assert prompt == traj.steps[0].prompt_ids
        own = [tok for tok, m in zip(completion, mask) if m]
        assert own == [tok for s in traj.steps for tok in s.completion_ids]
        for step in traj.steps[1:]:  # every later prompt is a prefix of the flattened sequence
            assert (prompt + completion)[: len(step.prompt_ids)] == step.prompt_ids
        env_text = tokenizer.decode([tok for tok, m in zip(completion, mask) if not m])
        assert "Counter at" in env_text or "Invalid action" in env_text
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
        scored = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
        recorded = torch.tensor(logprobs)
        on = torch.tensor(mask).bool()
        assert torch.allclose(scored[on], recorded[on], atol=2e-3)
        assert (recorded[~on] == 0).all()
    # the trainer-facing call shape: one completion per prompt, TRL's keys
    rollout = GRPORollout(COUNTER, num_envs=2, backend="inline", max_turns=3, max_new_tokens=10)
    fake_trainer = SimpleNamespace(
        model=model,
        num_generations=2,
        num_generations_eval=2,
        args=SimpleNamespace(temperature=1.0, top_p=1.0, max_completion_length=40),
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        processing_class=tokenizer,
    )
    with one_torch_thread():
        out = rollout(["counter-1", "counter-1", "counter-2", "counter-2"], fake_trainer)
    rollout.close()
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"} <= set(out)
    assert len(out["completion_ids"]) == 4 and all(len(c) <= 40 for c in out["completion_ids"])
    assert all(len(c) == len(m) == len(lp) for c, m, lp in zip(out["completion_ids"], out["env_mask"], out["logprobs"]))
    with pytest.raises(ValueError, match="num_generations"):
        rollout(["counter-1", "counter-2", "counter-3"], fake_trainer)


@pytest.mark.model
def test_rollout_marks_whole_episodes_warns_on_cuts_and_sends_the_server_token():
    """A whole flattened episode ends in an (untrained) EOS, so TRL does not count it as truncated;
    an episode cut at max_completion_length does not, and warns; server_token reaches serve-env."""
    import warnings
    from types import SimpleNamespace

    from env_servers import env_server

    model, tokenizer = _model()
    eos = tokenizer.eos_token_id

    def trainer(limit):
        return SimpleNamespace(
            model=model,
            num_generations=2,
            num_generations_eval=2,
            processing_class=tokenizer,
            args=SimpleNamespace(temperature=1.0, top_p=1.0, max_completion_length=limit),
            accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        )

    with env_server(token="s3cret") as (url, store):
        rollout = GRPORollout(
            COUNTER,
            num_envs=2,
            backend="remote",
            servers=[url],
            server_token="s3cret",
            max_turns=3,
            max_new_tokens=10,
        )
        with one_torch_thread(), warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing is cut: no warning
            whole = rollout(["counter-1", "counter-1"], trainer(1000))
        assert store.stats()["steps"] > 0 and all(t.scorable for t in rollout.last_trajectories)
        for ids, mask, logprobs in zip(whole["completion_ids"], whole["env_mask"], whole["logprobs"]):
            assert ids[-1] == eos and mask[-1] == 0 and logprobs[-1] == 0.0
        with (
            one_torch_thread(),
            pytest.warns(
                UserWarning,
                match=r"2 of 2 episodes were cut at "
                r"max_completion_length=12",
            ),
        ):
            cut = rollout(["counter-1", "counter-1"], trainer(12))
        assert all(len(ids) == 12 and ids[-1] != eos for ids in cut["completion_ids"])
        assert all(t.metadata["flatten_cut_at_token"] == 12 for t in rollout.last_trajectories)
        rollout.close()
        # no token: the server refuses the pool, which says so rather than scoring anything
        bare = GRPORollout(COUNTER, num_envs=2, backend="remote", servers=[url], max_turns=3, max_new_tokens=10)
        with one_torch_thread(), pytest.raises(Exception, match="401|token|auth"):
            bare(["counter-1", "counter-1"], trainer(1000))
        bare.close()


def test_environment_factory_class_exposes_the_env_tools():
    from transformers.utils import get_json_schema

    cls = environment_class("turngym/ToolQA-v0")
    env = cls()
    intro = env.reset(task_id="toolqa-arithmetic-0000", seed=0)
    assert "tool" in intro.lower()
    schema = get_json_schema(cls.calculator)  # how TRL and transformers read a tool
    assert schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"]["required"] == ["expression"]
    assert schema["function"]["parameters"]["properties"]["expression"]["type"] == "string"
    assert env.calculator(expression="(587 * 38 - 6581) / 8") == "1965.625"
    assert env.get_reward() == 0.0
    env.answer(answer="1965.625")
    assert env.get_reward() == 1.0 and env.calculator(expression="1") == "The episode is over."
    # a text env is served through its tools-mode twin
    counter = environment_class(COUNTER)()
    counter.reset(task_id="counter-1")
    assert "Counter at" in counter.inc()


@pytest.mark.model
def test_grpo_runs_with_the_environment_factory(tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    model, tokenizer = _model()
    # SmolLM2's own template cannot render tool calls; Qwen2.5's uses the same ChatML tokens
    tokenizer.chat_template = qwen2_5_chat_template
    import turngym

    task_ids = turngym.make("turngym/ToolQA-v0").task_ids()[:4]
    data = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": "Solve the task with the tools."}], "task_id": task_id}
            for task_id in task_ids
        ]
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=_config(tmp_path, max_completion_length=24, max_steps=1),
        train_dataset=data,
        environment_factory=environment_class("turngym/ToolQA-v0"),
    )
    with one_torch_thread():
        trainer.train()
    assert trainer.state.global_step == 1
    assert any("ToolqaEnvironment" in key or "reward" in key for key in trainer.state.log_history[0])


# ----- per-turn advantages (TurnGRPOTrainer) ------------------------------------------------------------
def expected_token_advantages(record: dict, per_traj: list) -> list[list[float]]:
    """Each completion's advantages as turngym's estimator says: turn t's reply tokens (found by walking
    the env mask over the steps' own completion ids) get A_t, everything else 0."""
    rows = []
    for traj, ids, mask, values in zip(record["trajectories"], record["completion_ids"], record["env_mask"], per_traj):
        owner = [t for t, step in enumerate(traj["steps"]) for _ in step["completion_ids"]]
        own = [tok for s in traj["steps"] for tok in s["completion_ids"]]
        row, k = [], 0
        for tok, m in zip(ids, mask):
            if m and k < len(own):
                assert tok == own[k]
                row.append(float(values[owner[k]]))
                k += 1
            else:
                row.append(0.0)
        rows.append(row)
    return rows


def check_turn_advantages(records: list[dict], estimator: str) -> int:
    """``records``: every process's record of one run. Returns how many completions were checked."""
    from turngym.core.records import Trajectory
    from turngym.trainers.advantages import ESTIMATORS, Batch

    checked = 0
    for call in range(len(records[0]["generated"])):
        parts = [r["generated"][call] for r in records]
        trajs = [Trajectory.from_dict(d) for p in parts for d in p["trajectories"]]
        per_traj = ESTIMATORS[estimator].advantages(Batch(trajs)).step  # turngym's own path, whole batch
        assert any(abs(a).max() > 0 for a in per_traj if len(a))
        offset = 0
        for part in parts:
            mine = per_traj[offset : offset + len(part["trajectories"])]
            offset += len(part["trajectories"])
            want = expected_token_advantages(part, mine)
            assert torch.allclose(torch.tensor(part["advantages"]), torch.tensor(want), atol=1e-6)
            checked += len(want)
    for record in records:  # what the loss saw is what was generated (rows shuffled by TRL)
        rows = {tuple(ids): adv for g in record["generated"] for ids, adv in zip(g["completion_ids"], g["advantages"])}
        for batch in record["trained"]:
            assert batch["loss_tokens"] > 0
            for ids, adv in zip(batch["completion_ids"], batch["advantages"]):
                assert adv == rows[tuple(ids)]
    return checked


@pytest.mark.model
def test_trl_trains_on_the_estimators_per_turn_advantages(tmp_path):
    import trl_turns

    model, tokenizer = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with one_torch_thread():
        trainer = trl_turns.train(model, tokenizer, str(tmp_path), "gigpo", {})
    assert trainer.state.global_step == 2
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    record = {"generated": trainer.generated, "trained": trainer.trained}
    assert check_turn_advantages([record], "gigpo") == 8
    # per turn, not per episode: some episode's turns get different advantages
    assert any(len({round(a, 6) for a in row if a}) > 1 for g in trainer.generated for row in g["advantages"])
    # whole episodes end in EOS: TRL counts none as truncated, so mask_truncated_completions keeps them
    clipped = [h["completions/clipped_ratio"] for h in trainer.state.log_history if "completions/clipped_ratio" in h]
    assert clipped == [0.0, 0.0]


@pytest.mark.model
@pytest.mark.slow
def test_two_processes_estimate_each_split_group_whole(tmp_path):
    """accelerate launch, 2 CPU processes (gloo): each group of 4 has 2 members on each process, and
    the advantages each process trains on are the estimator's over the whole group."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from policy_models import cache_env

    from turngym.core.records import Trajectory
    from turngym.core.servers import free_port
    from turngym.trainers.advantages import ESTIMATORS, Batch

    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate launcher is not installed next to this python")
    tiny()  # fills the model cache the subprocesses read
    root = Path(__file__).resolve().parents[2]
    # --multi_gpu picks accelerate's torchrun launcher (with --cpu it would start one process);
    # the script's use_cpu=True makes each process a CPU one on the gloo backend
    cmd = [
        accelerate,
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(root / "tests" / "support" / "trl_turns.py"),
        str(tmp_path),
        "hgpo",
    ]
    env = {**os.environ, **cache_env(), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in records] == [2, 2] and [r["steps"] for r in records] == [2, 2]
    for call in range(2):
        halves = [r["generated"][call]["trajectories"] for r in records]
        # the group straddles the processes: same group id and start on both, different episodes
        assert {t["group_id"] for t in halves[0]} == {t["group_id"] for t in halves[1]}
        assert halves[0][0]["initial_observation"] == halves[1][0]["initial_observation"]
    assert check_turn_advantages(records, "hgpo") == 8
    # and half a group would have given other numbers: the gather matters
    differs = False
    for call in range(2):
        for r in records:
            part = r["generated"][call]
            alone = ESTIMATORS["hgpo"].advantages(Batch([Trajectory.from_dict(d) for d in part["trajectories"]])).step
            differs |= expected_token_advantages(part, alone) != part["advantages"]
    assert differs
    assert all(r["clipped"] == [0.0, 0.0] for r in records)


@pytest.mark.slow  # importing TRL's GRPOTrainer takes seconds
def test_turn_trainer_refuses_untested_trl_and_value_head_estimators():
    from turngym.integrations.trl import TurnGRPOTrainer, check_trl_version

    check_trl_version("1.16.0")
    check_trl_version("1.16.3")
    for version in ("1.15.2", "1.17.0", "2.0.0"):
        with pytest.raises(ImportError, match=f"trl {version} is untested"):
            check_trl_version(version)
    # both fail before TRL builds anything
    with pytest.raises(ValueError, match="estimator: 'turn_gae' needs a value head"):
        TurnGRPOTrainer(model=None, estimator="turn_gae")
    with pytest.raises(ValueError, match="estimator_args.lam: not an option of gigpo"):
        TurnGRPOTrainer(model=None, estimator="gigpo", estimator_args={"lam": 0.9})


@pytest.mark.model
@pytest.mark.slow  # a short SFT and one GRPO step with the tiny model: about a minute or two
def test_turn_credit_example_puts_each_turns_advantage_on_its_tokens(tmp_path, monkeypatch):
    """examples/trl_turn_credit.py starts from a policy that sometimes succeeds, so its group has
    both outcomes, and some episode's turns carry different nonzero advantages on their own tokens
    (each turn's value from the estimator, every env token 0) in the tensor TRL's loss gets."""
    import runpy
    from pathlib import Path

    from policy_models import cache_env

    for name, value in cache_env().items():
        monkeypatch.setenv(name, value)
    example = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "trl_turn_credit.py"))
    with one_torch_thread():
        trainer, rollout, table = example["main"](str(tmp_path))
    returns = [t.episode_return for t in rollout.last_trajectories]
    assert 0 < sum(r > 0 for r in returns) < len(returns), returns
    credited = 0
    for turns, per_step, traj in zip(table, trainer.last_turn_advantages, rollout.last_trajectories):
        assert len(turns) == traj.length and all(count == len(ids) > 0 for _, count, ids in turns)
        values = [value for value, _, _ in turns]
        assert values == pytest.approx([float(a) for a in per_step], abs=1e-5)  # float32 on the tokens
        credited += all(values) and len({round(v, 6) for v in values}) > 1
    assert credited > 0, table
    for steps, row in zip(rollout.last_token_steps, trainer.last_token_advantages):
        assert all(float(v) == 0.0 for s, v in zip(steps, row) if s < 0)
