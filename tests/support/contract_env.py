"""A small env that exercises the TurnEnv contract before (and beside) the real envs."""

from __future__ import annotations

import turngym
from turngym.core.env import TurnEnv

TASKS = {
    f"counter-{i}": {
        "task_id": f"counter-{i}",
        "target": i % 7 - 3,
        "split": "test" if i % 5 == 0 else "train",
    }
    for i in range(20)
}


class CounterEnv(TurnEnv):
    """Move a counter to the target with `inc` / `dec`, then `submit`."""

    def __init__(self, crash_on: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.crash_on = crash_on
        self.value = 0

    def task_ids(self, split=None):
        split = split or self.split
        return sorted(k for k, t in TASKS.items() if t["split"] == split)

    def get_task(self, task_id):
        if task_id not in TASKS:
            raise ValueError(f"task_id: unknown {task_id!r}")
        return TASKS[task_id]

    def instructions(self):
        return "Reach the target number with `inc` or `dec`, then `submit`."

    def state(self):
        return {"value": self.value, "done": self._done}

    def admissible_actions(self):
        return ["dec", "inc", "submit"]

    def _reset(self, task):
        # start value drawn from the episode seed: same seed, same start
        self.value = int(self.episode_seed % 5) - 2
        return f"Target {task['target']}. Counter at {self.value}.", {}

    def _step(self, action):
        if self.crash_on is not None and action.strip() == self.crash_on:
            raise RuntimeError("simulated env crash")
        cmd = action.strip().lower()
        if cmd == "inc":
            self.value += 1
        elif cmd == "dec":
            self.value -= 1
        elif cmd == "submit":
            ok = self.value == self.task["target"]
            return (
                ("Correct!" if ok else "Wrong."),
                float(ok),
                True,
                False,
                {"is_success": ok, "progress": float(ok)},
            )
        else:
            return (
                f"Invalid action {action[:40]!r}: use inc, dec or submit.",
                0.0,
                False,
                False,
                {"action_valid": False, "parse_error": "unknown command"},
            )
        return f"Counter at {self.value}.", 0.0, False, False, {}

    def expert_action(self):
        target = self.task["target"]
        return "inc" if self.value < target else "dec" if self.value > target else "submit"


COUNTER_VERBS = [
    {"name": "inc", "command": "inc", "description": "Add one to the counter.", "parameters": {}},
    {"name": "dec", "command": "dec", "description": "Subtract one from the counter.", "parameters": {}},
    {"name": "submit", "command": "submit", "description": "Submit the counter's value.", "parameters": {}},
]


def register() -> None:
    turngym.register(
        "turngym-tests/Counter-v0",
        "contract_env:CounterEnv",
        max_episode_steps=20,
        description="Counter: the contract test env",
        family="tests",
    )
    turngym.register(
        "turngym-tests/CrashyCounter-v0",
        "contract_env:CounterEnv",
        kwargs={"crash_on": "dec"},
        max_episode_steps=20,
        description="Counter that crashes on `dec`",
        family="tests",
    )
    # tools mode over the same engine: inc() / dec() / submit() calls
    from turngym.tools.registration import register_tools_variant

    register_tools_variant("turngym-tests/Counter-v0", verbs=COUNTER_VERBS)
