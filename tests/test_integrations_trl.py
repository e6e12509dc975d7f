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
    env_reward_func,
    environment_class,
    flatten_episode,
    task_dataset,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
COUNTER = "turngym-tests/Counter-v0"


def _config(tmp_path, **overrides):
    from trl import GRPOConfig

    options = dict(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4, num_generations=2,
                   max_completion_length=160, temperature=1.0, learning_rate=1e-4, beta=0.0, max_steps=2,
                   logging_steps=1, save_strategy="no", report_to="none", bf16=False, seed=0, disable_tqdm=True)
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

    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=_config(tmp_path), train_dataset=data,
                          reward_funcs=[env_reward_func, longer_is_better], rollout_func=rollout)
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
        trajs = pool.rollout(policy, ["counter-1", "counter-2"], group_size=1, max_steps=3)
    multi = [t for t in trajs if t.length > 1]
    assert multi, "the random tiny model should not end these episodes in one turn"
    for traj in multi:
        prompt, completion, logprobs, mask = flatten_episode(traj)
        assert "flatten_cut_at_turn" not in traj.metadata
        assert prompt == traj.steps[0].prompt_ids
        own = [tok for tok, m in zip(completion, mask) if m]
        assert own == [tok for s in traj.steps for tok in s.completion_ids]
        for step in traj.steps[1:]:  # every later prompt is a prefix of the flattened sequence
            assert (prompt + completion)[:len(step.prompt_ids)] == step.prompt_ids
        env_text = tokenizer.decode([tok for tok, m in zip(completion, mask) if not m])
        assert "Counter at" in env_text or "Invalid action" in env_text
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1].float()
        scored = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
        recorded = torch.tensor(logprobs)
        on = torch.tensor(mask).bool()
        assert torch.allclose(scored[on], recorded[on], atol=2e-3)
        assert (recorded[~on] == 0).all()
    # the trainer-facing call shape: one completion per prompt, TRL's keys
    rollout = GRPORollout(COUNTER, num_envs=2, backend="inline", max_turns=3, max_new_tokens=10)
    fake_trainer = SimpleNamespace(model=model, num_generations=2, num_generations_eval=2,
                                   args=SimpleNamespace(temperature=1.0, top_p=1.0, max_completion_length=40),
                                   accelerator=SimpleNamespace(unwrap_model=lambda m: m), processing_class=tokenizer)
    with one_torch_thread():
        out = rollout(["counter-1", "counter-1", "counter-2", "counter-2"], fake_trainer)
    rollout.close()
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"} <= set(out)
    assert len(out["completion_ids"]) == 4 and all(len(c) <= 40 for c in out["completion_ids"])
    assert all(len(c) == len(m) == len(lp) for c, m, lp in zip(out["completion_ids"], out["env_mask"],
                                                                  out["logprobs"]))
    with pytest.raises(ValueError, match="num_generations"):
        rollout(["counter-1", "counter-2", "counter-3"], fake_trainer)


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
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "Solve the task with the tools."}],
                               "task_id": task_id} for task_id in task_ids])
    trainer = GRPOTrainer(model=model, processing_class=tokenizer,
                          args=_config(tmp_path, max_completion_length=24, max_steps=1),
                          train_dataset=data, environment_factory=environment_class("turngym/ToolQA-v0"))
    with one_torch_thread():
        trainer.train()
    assert trainer.state.global_step == 1
    assert any("ToolqaEnvironment" in key or "reward" in key for key in trainer.state.log_history[0])
