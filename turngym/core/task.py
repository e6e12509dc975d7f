"""Task: what an env plays, kept apart from the env runtime that plays it (BrowserGym's split).

An env runtime owns the world (a page, a household engine, a shop session, a repository),
reads actions and writes observations. A ``Task`` object owns the rest: which task rows there
are, how an episode of one starts, how the world is scored, and what the oracle would do.

    task_ids(split) -> [task_id, ...]       stable ids of the tasks in a split
    get_task(task_id) -> row                the task row (a JSON-serialisable dict with "task_id")
    setup(world, task) -> goal text         start ``task`` in ``world`` (fresh from the runtime)
    validate(world, task) -> Validation     score ``world`` as the last step left it
    expert_action(world, task) -> action    the oracle's next action in ``world``

An env keeps its one ``Task``, its task set, in ``env.task_set``, next to ``env.task``, the
current episode's task row. ``world`` is whatever the family's runtime keeps per episode (its
``Task`` class says which); ``task`` is the row ``get_task`` gave. ``validate``
runs once after each step that may change the score (some families: only after the action that
ends the episode), so a task may pay a gain once; ``setup`` resets what a task remembers within
an episode (the household's current goal, the shop oracle's searches). The browser family's
tasks define the same three methods as coroutines, since their world is a live page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Validation:
    """A task's verdict on the world: the reward so far, whether the episode is over, and why.

    ``error`` is set when the infrastructure (a sandbox, a browser) failed while validating: the
    episode cannot be scored (``TurnEnv.fail_infra``)."""

    reward: float = 0.0
    done: bool = False
    success: bool = False
    components: dict[str, float] = field(default_factory=dict)
    progress: float = 0.0
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@runtime_checkable
class Task(Protocol):
    """The task side of an env: its rows, their set-up, their validation and their expert."""

    def task_ids(self, split: str) -> list[str]: ...

    def get_task(self, task_id: str) -> dict[str, Any]: ...

    def setup(self, world: Any, task: dict[str, Any]) -> str: ...

    def validate(self, world: Any, task: dict[str, Any]) -> Validation: ...

    def expert_action(self, world: Any, task: dict[str, Any]) -> str: ...
