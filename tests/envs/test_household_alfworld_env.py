"""turngym/ALFWorld-v0: the real engine behind turngym's StepInfo contract.

The engine (TextWorld 1.7.0 with fast-downward, ALFWorld 0.4.2) is an optional extra that
compiles a planner, so the project's venv does not hold it: these tests run in the reference venv
``.bench-venvs/alfworld``, built here on first use (about 4 minutes, from PyPI) by the same code as
``benchmarks/household_fidelity.py``; they skip only when that build fails, with its error.
Without the extra, the id is not registered at all.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import turngym

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / ".bench-venvs" / "alfworld" / "bin" / "python"

SCRIPT = """
import json, sys
import turngym
from turngym.core.env import STEP_INFO_KEYS
env = turngym.make("turngym/ALFWorld-v0")
out = []
for path, plan in json.loads(sys.argv[1]):
    obs, info = env.reset(options={"task": {"alfworld_game": path}})
    assert set(info) == set(STEP_INFO_KEYS), sorted(info)
    bad = env.step("put nothing in/on nowhere")
    assert bad[0] == "Nothing happens." and not bad[4]["action_valid"] and bad[4]["parse_error"]
    assert bad[4]["state_key"] == info["state_key"]
    steps = [env.step(c) for c in plan]
    out.append({"obs": obs, "rewards": [s[1] for s in steps], "last": steps[-1][4]["is_success"]})
print(json.dumps(out))
"""


def test_not_registered_without_the_engine():
    if importlib.util.find_spec("textworld") is None:
        assert "turngym/ALFWorld-v0" not in {s.id for s in turngym.list_envs()}


@pytest.fixture(scope="module")
def engine() -> Path:
    if ENGINE.exists():
        return ENGINE
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from household_fidelity import engine_python

        return engine_python()
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"could not build .bench-venvs/alfworld (TextWorld's planner compiles from PyPI): {e}")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_alfworld_env_plays_exported_games(tmp_path, engine):
    from turngym.envs.household import alfworld_files, generator
    from turngym.envs.household.wording import HEADER

    games = []
    for task in generator.task_ids("room", "valid_unseen")[:3]:
        blueprint = generator.build_blueprint(task)
        env = turngym.make("turngym/Household-v0")
        _, info = env.reset(options={"task_id": task})
        plan = []
        while not info["is_success"]:
            plan.append(env.expert_action())
            *_, info = env.step(plan[-1])
        path = alfworld_files.save_blueprint(blueprint, tmp_path / f"{len(games)}.tw-pddl")
        games.append((str(path), plan))
    run = subprocess.run(
        [str(engine), "-c", SCRIPT, json.dumps(games)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.splitlines()[-1])
    assert len(results) == len(games)
    for result in results:
        assert result["obs"].startswith(HEADER)
        assert result["rewards"][-1] == 1.0 and sum(result["rewards"]) == 1.0 and result["last"]


REPLAY = """
import json, sys
from turngym.envs.household.alfworld_env import ALFWorldEnv
games, episodes = json.loads(sys.argv[1])
env = ALFWorldEnv(games=games, split="valid_seen")
out = {"task_ids": env.task_ids("valid_seen"), "episodes": []}
for commands in episodes:
    obs, info = env.reset(seed=0)
    steps = [[obs, sorted(info["admissible_actions"]), True, info["is_success"]]]
    for c in commands:
        obs, _, _, _, info = env.step(c)
        steps.append([obs, sorted(info["admissible_actions"]), info["action_valid"], info["is_success"]])
    out["episodes"].append(steps)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_file_in_alfworlds_own_structure_plays_alike(engine):
    """The hand-made game in the structure of ALFWorld's json_2.1.1 files (see
    tests/envs/test_household_alfworld_files.py), found in its folder as ALFWorld's data would be, played
    by both engines: its walkthrough, probes of its quirks and a random walk, step by step."""
    import gzip
    import random

    recorded = json.loads(gzip.open(ROOT / "tests" / "data" / "alfworld_json_referee.json.gz", "rt").read())
    game = ROOT / recorded["game"]
    env = turngym.make("turngym/Household-v0")
    rng = random.Random(7)
    episodes = [recorded["episodes"][0]["commands"], recorded["episodes"][1]["commands"][:30], []]
    obs, info = env.reset(options={"task": {"alfworld_game": str(game)}})
    for _ in range(25):  # a fresh random walk, not the recorded ones
        episodes[2].append(rng.choice(info["admissible_actions"]))
        *_, info = env.step(episodes[2][-1])
    run = subprocess.run(
        [str(engine), "-c", REPLAY, json.dumps([str(ROOT / "tests" / "data" / "alfworld_json"), episodes])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout.splitlines()[-1])
    assert theirs["task_ids"] == [str(game)]
    for commands, steps in zip(episodes, theirs["episodes"], strict=True):
        obs, info = env.reset(options={"task": {"alfworld_game": str(game)}})
        ours = [[obs, sorted(info["admissible_actions"]), True, info["is_success"]]]
        for c in commands:
            obs, _, _, _, info = env.step(c)
            ours.append([obs, sorted(info["admissible_actions"]), info["action_valid"], info["is_success"]])
        assert ours == steps
    assert theirs["episodes"][0][-1][3]  # the walkthrough wins in ALFWorld
