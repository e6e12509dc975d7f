"""Grouped rollouts for training and evaluation: ``collect`` runs episodes through ``EnvPool``
and records the spans of each reply (``parse_spans``: think / switch / subgoal / action), with
``TurnProgress`` counting turns and tokens for progress bars."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from turngym.core.policy import Policy
from turngym.core.records import Trajectory, reply_text

if TYPE_CHECKING:  # the pool imports the records; this module needs it only for type hints
    from turngym.core.pool import EnvPool

#: the tagged parts of a reply that ``Step.spans`` can hold
SPAN_NAMES = ("think", "switch", "subgoal", "action")
_TAG = re.compile(r"<(think|switch|subgoal|action)>(.*?)</\1>", re.DOTALL)


def parse_spans(text: str) -> dict[str, list[int]]:
    """The tagged parts of a reply as ``name -> [start, end)`` character ranges of their content
    (``<think>``, ``<switch>``, ``<subgoal>``, ``<action>``; the first of each name counts). An
    untagged reply is all action: ``{"action": [0, len(text)]}``."""
    spans: dict[str, list[int]] = {}
    for m in _TAG.finditer(text):
        spans.setdefault(m.group(1), [m.start(2), m.end(2)])
    if not spans:
        spans["action"] = [0, len(text)]
    return spans


def collect(
    pool: EnvPool,
    policy: Policy,
    task_ids: list[str],
    group_size: int,
    seed: int,
    max_turns: int,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    bar: Any = None,
    branches: int = 0,
    branch_points: int = 1,
    branch_after: int = 0,
) -> list[Trajectory]:
    """Grouped rollouts with the spans of each reply; ``bar`` (tqdm) shows episodes, turns and tokens/s.
    ``branches`` >= 1: tree rollouts, that many continuations at each of ``branch_points`` branch
    points per group, chosen once the roots ended or (``branch_after`` >= 1) played that many
    turns (``turngym.core.pool.tree``)."""
    if bar is not None:
        done = on_trajectory

        def on_trajectory(traj):
            bar.update(1)
            if done is not None:
                done(traj)

    if branches:
        from turngym.core.pool.tree import tree_rollout  # the pool imports this module's records

        trajectories = tree_rollout(
            pool,
            with_progress(policy, bar),
            task_ids,
            group_size=group_size,
            branches=branches,
            points=branch_points,
            after=branch_after,
            seed=seed,
            max_turns=max_turns,
            on_trajectory=on_trajectory,
        )
    else:
        trajectories = pool.rollout(
            with_progress(policy, bar),
            task_ids,
            group_size=group_size,
            seed=seed,
            max_turns=max_turns,
            on_trajectory=on_trajectory,
        )
    for traj in trajectories:
        for step in traj.steps:
            # spans index the raw reply (think / switch / subgoal / action); the env saw only the
            # action parsed from it
            step.spans = parse_spans(reply_text(step))
    return trajectories


class TurnProgress:
    """A policy wrapper that counts turns and generated tokens, and reports them after each batch.

    Episodes of a long task can take minutes each; a bar that moves only when an episode ends
    looks frozen. ``report(text)`` gets e.g. ``"412 turns, 38 tok/s"`` after every ``act``.
    Everything else (``env_side``, ``prompt``, ...) reads through to the wrapped policy.
    """

    def __init__(self, policy, report):
        self.policy, self.report = policy, report
        self.turns = self.tokens = 0
        self.seconds = 0.0

    def act(self, conversations):
        start = time.perf_counter()
        outs = self.policy.act(conversations)
        self.seconds += time.perf_counter() - start
        self.turns += len(conversations)
        self.tokens += sum(len(getattr(o, "completion_ids", None) or []) for o in outs)
        rate = f", {self.tokens / self.seconds:.0f} tok/s" if self.tokens and self.seconds > 0 else ""
        self.report(f"{self.turns} turns{rate}")
        return outs

    def __getattr__(self, name):
        return getattr(self.policy, name)


def with_progress(policy, bar):
    """``policy`` reporting turns and tokens/s in a tqdm ``bar``'s postfix (unchanged when no bar)."""
    if bar is None or getattr(bar, "disable", False):
        return policy
    return TurnProgress(policy, lambda text: bar.set_postfix_str(text, refresh=True))
