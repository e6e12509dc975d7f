import subprocess
import sys
from pathlib import Path

import pytest

from turngym.cli import BUILTIN_COMMANDS, EXTERNAL_COMMANDS, main
from turngym.core.records import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    # contract_env registers the test envs, as the conftest does in this process
    code = (
        "import sys, contract_env; contract_env.register(); from turngym.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        input=input,
        env={"PYTHONPATH": f"{ROOT / 'tests' / 'support'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_list_shows_ids_tags_and_descriptions(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "turngym-tests/Counter-v0" in out and "[tests/text]" in out and "contract test env" in out


def test_eval_prints_a_table_and_writes_trajectories(tmp_path, capsys):
    out_file = tmp_path / "eval.jsonl"
    assert (
        main(
            [
                "eval",
                "turngym-tests/Counter-v0",
                "--policy",
                "expert",
                "--split",
                "test",
                "--out",
                str(out_file),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "success_rate" in out and "1.000" in out
    trajs = read_jsonl(out_file)
    assert len(trajs) == 4 and all(t.success for t in trajs)


def test_eval_names_the_env_hash_and_warns_when_the_policy_trained_on_another(tmp_path, capsys, monkeypatch):
    import json

    from turngym.agents import ExpertPolicy, loading
    from turngym.agents.engine import memory
    from turngym.core.versions import env_hash

    version = env_hash("turngym-tests/Counter-v0")
    # a trained policy stands in as the expert: what is checked is the run it came from
    monkeypatch.setattr(loading, "load_policy", lambda *a, **k: ExpertPolicy())
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: False)
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    rows = [{"update": 0, "env_id": "turngym-tests/Counter-v0", "env_hash": "0123456789ab"}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["eval", "turngym-tests/Counter-v0", "--policy", f"hf:{run / 'model'}", "--split", "test"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert version in out
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "0123456789ab" in warning[0] and version in warning[0]
    rows[0]["env_hash"] = version
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err


def test_eval_takes_env_options_and_a_turn_limit(tmp_path, capsys):
    out_file = tmp_path / "eval.jsonl"
    # the expert needs 4 turns; cut at 2, with the actions listed in the observation turned off
    assert (
        main(
            [
                "eval",
                "turngym/Household-Easy-v0",
                "--episodes",
                "3",
                "--max-turns",
                "2",
                "--out",
                str(out_file),
                "--env-kwargs",
                "admissible_in_observation=false,shaped_reward=0.5",
            ]
        )
        == 0
    )
    trajs = read_jsonl(out_file)
    assert len(trajs) == 3 and all(len(t.steps) == 2 and not t.success for t in trajs)
    assert all("Admissible actions" not in s.observation for t in trajs for s in t.steps)
    assert all(t.episode_return > 0 for t in trajs)  # the shaped reward for the expert's first steps


@pytest.mark.slow
def test_unknown_env_and_bad_policy_give_one_clear_line():
    r = run_cli("eval", "turngym-tests/Nope-v0")
    assert r.returncode == 2 and "unknown env id" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("eval", "turngym-tests/Counter-v0", "--policy", "magic")
    assert r.returncode == 2 and "--policy" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("eval", "turngym-tests/Counter-v0", "--split", "nope")
    assert r.returncode == 2 and "split" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("eval", "turngym-tests/Counter-v0", "--episodes", "many")
    assert r.returncode == 2 and "--episodes" in r.stderr


def test_top_level_help_lists_every_command():
    r = run_cli("--help")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert all(name in r.stdout for name in [*BUILTIN_COMMANDS, *EXTERNAL_COMMANDS])


@pytest.mark.parametrize("command", [*BUILTIN_COMMANDS, *EXTERNAL_COMMANDS])
@pytest.mark.slow
def test_help_on_every_command(command):
    r = run_cli(command, "--help")
    assert r.returncode == 0 and "usage: turngym" in r.stdout


def test_play_in_the_terminal():
    r = run_cli(
        "play",
        "turngym-tests/Counter-v0",
        "--task-id",
        "counter-6",
        "--seed",
        "0",
        input="inc\ninc\ninc\ninc\ninc\nsubmit\n",
    )
    assert r.returncode == 0, r.stderr
    assert "Admissible actions: dec | inc | submit" in r.stdout
    assert "Episode over" in r.stdout
