"""Split names and the task ids of a split, with the error that names the splits an env has."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from turngym.core.env import TurnEnv


#: split names used across the families (see docs/splits.md)
SPLIT_NAMES = ("train", "valid", "valid_seen", "valid_unseen", "eval", "dev", "test")


def split_task_ids(env: TurnEnv, split: str, field: str, env_id: str) -> list[str]:
    """The task ids of ``split``; a ``ValueError`` naming ``field`` and the splits the env has when
    there are none (an unknown split included)."""
    try:
        tasks = env.task_ids(split)
    except (ValueError, KeyError):
        tasks = []
    if not tasks:
        raise ValueError(
            f"{field}: {split!r} has no tasks for {env_id}; allowed: {', '.join(splits_of(env)) or 'none found'}"
        )
    return tasks


def splits_of(env: TurnEnv) -> list[str]:
    """The usual split names that hold tasks for this env (for messages naming allowed values)."""
    found = []
    for split in SPLIT_NAMES:
        try:
            if env.task_ids(split):
                found.append(split)
        except Exception:  # noqa: BLE001 - an env may raise on a split it does not know
            pass
    return found
