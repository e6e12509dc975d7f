"""The small core everything else builds on: env base class, spaces, registry, records, pool."""

from turngym.core.env import (
    STEP_INFO_KEYS,
    ResetNeeded,
    StepInfo,
    TurnEnv,
)
from turngym.core.keys import canonical_json, state_key
from turngym.core.policy import Completion, Conversation, Policy
from turngym.core.pool import EnvPool
from turngym.core.records import Step, Trajectory, iter_jsonl, read_jsonl, to_dataset, write_jsonl
from turngym.core.registry import EnvTags, list_envs, make, register, snapshots_supported, spec, tags
from turngym.core.snapshot import Snapshot, SnapshotUnsupported
from turngym.core.spaces import UnicodeText

__all__ = [
    "STEP_INFO_KEYS",
    "Completion",
    "Conversation",
    "EnvPool",
    "EnvTags",
    "Policy",
    "ResetNeeded",
    "Snapshot",
    "SnapshotUnsupported",
    "Step",
    "StepInfo",
    "Trajectory",
    "TurnEnv",
    "UnicodeText",
    "canonical_json",
    "iter_jsonl",
    "list_envs",
    "make",
    "read_jsonl",
    "register",
    "snapshots_supported",
    "spec",
    "state_key",
    "tags",
    "to_dataset",
    "write_jsonl",
]
