"""Canonical JSON and the stable digests built on it: ``state_key`` (equal states, equal keys) and
``episode_id`` (the id of an episode's start), the same in every process and on every machine."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys, sets sorted, tuples as lists: equal values give equal text."""
    return json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_canonical(v) for v in obj), key=canonical_json)
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    if isinstance(obj, np.generic):
        return _canonical(obj.item())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _canonical(dataclasses.asdict(obj))
    return obj


def state_key(state: Any) -> str:
    """Stable hex digest of a state: same across processes, runs and machines.

    Never Python's ``hash()``, which is salted per process for strings.
    """
    # surrogatepass: an action such as "\ud800" may land in the state (a search box, a tool
    # argument); a lone surrogate is a valid Python str and must hash, not raise.
    return hashlib.blake2b(canonical_json(state).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def episode_id(env_id: str, task_id: str, episode_seed: int) -> str:
    """``info["episode_id"]``: the env's id of an episode's start, from what the env alone knows
    (its id, the task, the episode seed), so unseeded resets get one too. A pool's group
    (``turngym.core.records.group_id``: task and reset seed) names the same start from outside:
    within one env id its members share one ``episode_id``."""
    return state_key([env_id, task_id, episode_seed])[:16]
