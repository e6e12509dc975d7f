"""Command line: every mistake a new user makes ends in one line on stderr that names
the field (and the allowed values where there is a list), exit code 2, no traceback. Run
in-process (``main(argv)``) to stay fast."""

from __future__ import annotations

from pathlib import Path

import pytest

import turngym
from turngym.cli import main

COUNTER = "turngym-tests/Counter-v0"
GOOD_CONFIG = f"""env:
  id: {COUNTER}
  eval_split: test
model:
  name: tiny
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse exits
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _config(tmp_path, text: str = GOOD_CONFIG, name: str = "run.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# (argv builder, fragments the one line must contain)
MISTAKES = {
    # eval
    "eval-unknown-env": (lambda t: ["eval", "turngym-tests/Nope-v0"], ["unknown env id"]),
    "eval-env-typo": (lambda t: ["eval", "turngym-tests/Countr-v0"], ["did you mean", COUNTER]),
    "eval-bad-policy": (
        lambda t: ["eval", COUNTER, "--policy", "magic"],
        ["--policy", "expert", "openai:URL"],
    ),
    "eval-split": (lambda t: ["eval", COUNTER, "--split", "nope"], ["--split", "'nope'", "allowed", "train"]),
    "eval-episodes-word": (lambda t: ["eval", COUNTER, "--episodes", "many"], ["--episodes", "integer >= 1"]),
    "eval-episodes-negative": (lambda t: ["eval", COUNTER, "--episodes", "-3"], ["--episodes"]),
    "eval-episodes-zero": (lambda t: ["eval", COUNTER, "--episodes", "0"], ["--episodes", "integer >= 1"]),
    "eval-group-size-zero": (
        lambda t: ["eval", COUNTER, "--group-size", "0"],
        ["--group-size", "integer >= 1"],
    ),
    "eval-num-envs-zero": (lambda t: ["eval", COUNTER, "--num-envs", "0"], ["--num-envs"]),
    "eval-backend": (
        lambda t: ["eval", COUNTER, "--backend", "gpu"],
        ["--backend", "inline", "thread", "ray"],
    ),
    "eval-model-kwargs-no-value": (
        lambda t: ["eval", COUNTER, "--model-kwargs", "temperature"],
        ["--model-kwargs", "key=value"],
    ),
    "eval-env-kwargs-no-value": (
        lambda t: ["eval", COUNTER, "--env-kwargs", "shaped"],
        ["--env-kwargs", "key=value"],
    ),
    "eval-env-kwargs-unknown": (
        lambda t: ["eval", "turngym/Household-Easy-v0", "--env-kwargs", "shaped=0.5"],
        ["unknown keyword argument 'shaped'", "allowed", "shaped_reward"],
    ),
    "eval-env-kwargs-bad-value": (
        lambda t: ["eval", "turngym/Household-Easy-v0", "--env-kwargs", "shaped_reward=-1"],
        ["shaped_reward", ">= 0"],
    ),
    "eval-max-turns-zero": (lambda t: ["eval", COUNTER, "--max-turns", "0"], ["--max-turns", "integer >= 1"]),
    # a trained model's folder whose settings file is damaged (read before any model loads)
    "eval-hf-damaged-settings": (
        lambda t: [
            "eval",
            COUNTER,
            "--policy",
            "hf:" + str(Path(_config(t, "{oops", "turngym_policy.json")).parent),
        ],
        ["turngym_policy.json", "not valid JSON"],
    ),
    "eval-model-kwargs-for-expert": (
        lambda t: ["eval", COUNTER, "--model-kwargs", "temperature=0.5"],
        ["--model-kwargs", "expert policies take no options"],
    ),
    "eval-out-under-a-file": (
        lambda t: ["eval", COUNTER, "--out", str(t / "file.txt" / "x.jsonl")],
        ["--out", "is a file"],
    ),
    "eval-out-is-a-folder": (lambda t: ["eval", COUNTER, "--out", str(t)], ["--out", "is a folder"]),
    "eval-misspelt-option": (
        lambda t: ["eval", COUNTER, "--polcy", "expert"],
        ["turngym eval", "--polcy", "--policy"],
    ),
    "eval-seed-word": (lambda t: ["eval", COUNTER, "--seed", "abc"], ["--seed"]),
    "eval-no-env": (lambda t: ["eval"], ["turngym eval", "env"]),
    "eval-openai-no-url": (lambda t: ["eval", COUNTER, "--policy", "openai:"], ["--policy", "needs a URL"]),
    "eval-openai-not-http": (
        lambda t: ["eval", COUNTER, "--policy", "openai:ftp://host/v1"],
        ["url", "http"],
    ),
    "eval-openai-unreachable": (
        lambda t: [
            "eval",
            COUNTER,
            "--policy",
            "openai:http://127.0.0.1:9/v1",
            "--episodes",
            "1",
            "--model-kwargs",
            "max_retries=0,timeout=2",
        ],
        ["127.0.0.1:9"],
    ),
    "eval-openai-unknown-option": (
        lambda t: [
            "eval",
            COUNTER,
            "--policy",
            "openai:http://127.0.0.1:9/v1",
            "--model-kwargs",
            "temprature=1",
        ],
        ["--model-kwargs", "temperature"],
    ),
    # values out of range and non-booleans, refused before a model loads
    "eval-hf-top-k-negative": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "top_k=-5"],
        ["--model-kwargs", "top_k=", "allowed", ">= 0"],
    ),
    "eval-hf-top-p-above-one": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "top_p=1.5"],
        ["--model-kwargs", "top_p=", "(0, 1]"],
    ),
    "eval-hf-top-p-zero": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "top_p=0"],
        ["--model-kwargs", "top_p=", "(0, 1]"],
    ),
    "eval-hf-temperature-negative": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "temperature=-0.5"],
        ["--model-kwargs", "temperature=", ">= 0"],
    ),
    "eval-hf-temperature-nan": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "temperature=nan"],
        ["--model-kwargs", "temperature=", ">= 0"],
    ),
    "eval-hf-max-new-tokens-zero": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "max_new_tokens=0"],
        ["--model-kwargs", "max_new_tokens=", ">= 1"],
    ),
    "eval-hf-kv-cache-maybe": (
        lambda t: ["eval", COUNTER, "--policy", "hf:tiny", "--model-kwargs", "kv_cache=maybe"],
        ["--model-kwargs", "kv_cache=", "true or false"],
    ),
    "eval-openai-max-tokens-zero": (
        lambda t: [
            "eval",
            COUNTER,
            "--policy",
            "openai:http://127.0.0.1:9/v1",
            "--model-kwargs",
            "max_tokens=0",
        ],
        ["--model-kwargs", "max_tokens=", ">= 1"],
    ),
    "eval-hf-missing-model": (
        lambda t: ["eval", COUNTER, "--policy", "hf:/no/such/model"],
        ["model", "/no/such/model"],
    ),
    # play
    "play-bad-task-id": (lambda t: ["play", COUNTER, "--task-id", "nope"], ["task_id", "'nope'"]),
    "play-unknown-env": (lambda t: ["play", "turngym/Nope-v0"], ["unknown env id"]),
    "play-split": (lambda t: ["play", COUNTER, "--split", "nope"], ["split", "'nope'"]),
    # train
    "train-malformed-yaml": (
        lambda t: ["train", "--config", _config(t, "env: [1, 2\nmodel: {\n")],
        ["config:", "not valid YAML", "line"],
    ),
    "train-missing-config": (
        lambda t: ["train", "--config", str(t / "missing.yaml")],
        ["config:", "does not exist"],
    ),
    "train-config-suffix": (
        lambda t: ["train", "--config", _config(t, "x", "run.txt")],
        ["config:", ".yaml"],
    ),
    "train-train-split": (
        lambda t: ["train", "--config", _config(t), "env.train_split=trian", "--dry-run"],
        ["env.train_split", "'trian'", "allowed", "train"],
    ),
    "train-eval-split": (
        lambda t: ["train", "--config", _config(t), "env.eval_split=valid", "--dry-run"],
        ["env.eval_split", "allowed", "test"],
    ),
    "train-model-name": (
        lambda t: ["train", "--config", _config(t), "model.name=gpt-5", "--dry-run"],
        ["model.name", "smollm2-135m", "tiny"],
    ),
    "train-lora-modules": (
        lambda t: ["train", "--config", _config(t), "model.lora_target_modules=[qproj]", "--dry-run"],
        ["model.lora_target_modules", "q_proj"],
    ),
    "train-env-kwargs": (
        lambda t: ["train", "--config", _config(t), "env.kwargs={lenient_parser: true}", "--dry-run"],
        ["env.kwargs", "lenient_parser", "allowed"],
    ),
    "train-env-module": (
        lambda t: ["train", "--config", _config(t), "--env-module", "no_such_module_xyz", "--dry-run"],
        ["--env-module", "no_such_module_xyz"],
    ),
    "train-dry-run-env-typo": (
        lambda t: ["train", "--config", _config(t), f"env.id={COUNTER[:-3]}-v9", "--dry-run"],
        ["env.id", "unknown env id"],
    ),
    "train-estimator": (
        lambda t: ["train", "--config", _config(t), "rl.estimator=ppo", "--dry-run"],
        ["rl.estimator", "grpo"],
    ),
    "train-unknown-field": (
        lambda t: ["train", "--config", _config(t), "rl.lrr=1", "--dry-run"],
        ["rl.lrr", "unknown field", "lr"],
    ),
    "train-override-no-equals": (
        lambda t: ["train", "--config", _config(t), "rl.lr", "--dry-run"],
        ["rl.lr", "key.sub=value"],
    ),
    "train-wrong-type": (
        lambda t: ["train", "--config", _config(t), "rl.group_size=lots", "--dry-run"],
        ["rl.group_size", "int"],
    ),
    "train-below-minimum": (
        lambda t: ["train", "--config", _config(t), "rl.group_size=0", "--dry-run"],
        ["rl.group_size", ">= 1"],
    ),
    # report, view, serve-policy, top level
    "report-readme": (
        lambda t: ["report", _config(t, "# Title\n\nprose\n" * 30, "README.md")],
        ["README.md", "not a trajectory file"],
    ),
    "report-missing": (lambda t: ["report", str(t / "nope")], ["no such run directory or file"]),
    "view-missing": (lambda t: ["view", str(t / "nope.jsonl")], ["nope.jsonl"]),
    "serve-policy-port": (lambda t: ["serve-policy", "--port", "99999"], ["--port", "1-65535"]),
    "top-level-typo": (lambda t: ["evl"], ["turngym", "evl", "eval"]),
    "top-level-option": (lambda t: ["--polcy"], ["turngym", "--polcy"]),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_gives_one_line_naming_the_field(name, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x")
    argv_of, fragments = MISTAKES[name]
    code, out, err = run(argv_of(tmp_path), capsys)
    # what a terminal shows: after a carriage return (a cleared progress bar) only the rest remains
    lines = [ln.rsplit("\r", 1)[-1] for ln in err.split("\n")]
    lines = [ln for ln in lines if ln.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_there_are_at_least_30_mistakes():
    assert len(MISTAKES) >= 30


def test_model_kwargs_booleans_and_values_in_range_are_still_taken():
    from turngym.agents.loading import _HF_KEYS, _convert

    got = _convert(
        {
            "kv_cache": "No",
            "stop_at_action": "on",
            "top_k": "0",
            "top_p": "1",
            "temperature": "0",
            "max_tokens": "7",
        },
        _HF_KEYS,
        "hf",
    )
    assert got == {
        "kv_cache": False,
        "stop_at_action": True,
        "top_k": 0,
        "top_p": 1.0,
        "temperature": 0.0,
        "max_new_tokens": 7,
    }


def test_ctrl_c_during_training_says_the_run_can_resume(tmp_path, capsys, monkeypatch):
    import turngym.trainers.loop as loop

    def interrupted(cfg):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "train", interrupted)
    code, out, err = run(["train", "--config", _config(tmp_path), f"run_dir={tmp_path / 'run'}"], capsys)
    assert code == 130 and "resume" in err and len(err.strip().splitlines()) == 1


def test_eval_with_unscorable_episodes_prints_the_first_reason(capsys):
    # the expert needs `dec` on some tasks, and CrashyCounter crashes on `dec`
    code, out, err = run(["eval", "turngym-tests/CrashyCounter-v0", "--backend", "inline", "--num-envs", "1"], capsys)
    assert code == 0 and "unscorable" in out
    assert "episodes unscorable; the first because:" in err and "simulated env crash" in err


def test_make_with_an_unknown_keyword_lists_the_allowed_ones():
    with pytest.raises(TypeError, match=r"lenient_parser.*allowed: .*split.*max_turns"):
        turngym.make(COUNTER, lenient_parser=True)
    with pytest.raises(ValueError, match="lenient_parser"):  # a ValueError too, like every config error
        turngym.make(COUNTER, lenient_parser=True)


def test_plugin_envs_work_through_gymnasium_make_right_after_import():
    """A third-party package's ids resolve in ``gymnasium.make`` without calling turngym first."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = textwrap.dedent("""
        import importlib.metadata as md
        import sys
        from unittest import mock

        class EP:
            name, group, value = "guess", "turngym.envs", "contract_env:register_guess"
            def load(self):
                import contract_env
                def register_guess():
                    import turngym
                    turngym.register("guess/Guess-v0", "contract_env:CounterEnv", max_episode_steps=5)
                return register_guess

        real = md.entry_points
        def fake(**kw):
            return [EP()] if kw.get("group") == "turngym.envs" else real(**kw)
        with mock.patch("importlib.metadata.entry_points", fake):
            import gymnasium
            import turngym
            env = gymnasium.make("guess/Guess-v0")
            print(type(env.unwrapped).__name__)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{root / 'tests' / 'support'}:{root}", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("CounterEnv")
