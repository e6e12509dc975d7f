"""Step and Trajectory records, and their JSONL files (one trajectory a line).

A Step holds one turn: the observation the agent saw, the model's raw reply, the action parsed
from it (what ``env.step`` received), what the env answered, and what training needs (token ids
of the reply, log-probs, entropies, loss mask, spans of the reply). Fields a run does not use
stay empty. Files written before ``reply`` existed load with the reply set to the action; files
written before ``env_hash`` existed load with it empty, and those written before tree rollouts
load as roots (``parent`` "", ``branch_turn`` None).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Step:
    turn: int
    observation: str  # what the agent saw before acting
    action: str  # what env.step received (parsed from the reply)
    reply: str | None = None  # the model's raw reply (completion_ids are its tokens); None: the action
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    state_key: str = ""  # key of the state the action was taken in
    info: dict[str, Any] = field(default_factory=dict)  # StepInfo after the step
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1 on completion tokens the loss may use
    spans: dict[str, list[int]] = field(default_factory=dict)  # name -> [start, end) chars of reply
    advantage: float | None = None  # filled in by a trainer, shown by the viewer
    finish_reason: str = "stop"  # the reply ended at a stop ("stop") or at its token limit ("length")

    def __post_init__(self):
        if self.reply is None:  # a scripted turn, a str policy, or a file from before replies were kept
            self.reply = self.action


def reply_text(step: Step) -> str:
    """The model's raw reply, the text ``Step.spans`` index (never None: ``Step`` fills in the
    action for a turn without one)."""
    return step.reply


def group_id(task_id: str, seed: int) -> str:
    """The id of a group: the episodes that start from one task and one reset seed (GRPO's
    group). ``info["episode_id"]`` (``turngym.core.keys.episode_id``) names the same start from
    inside the env: a hash of the env id, the task and the episode seed drawn from the reset seed."""
    return f"{task_id}@{seed}"


@dataclass
class Trajectory:
    env_id: str
    task_id: str
    seed: int | None
    steps: list[Step] = field(default_factory=list)
    group_id: str = ""
    trajectory_id: str = ""
    initial_observation: str = ""
    initial_info: dict[str, Any] = field(default_factory=dict)
    episode_return: float = 0.0
    success: bool = False
    scorable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    #: content hash of the env id and kwargs that made it (``turngym.core.versions.env_hash``);
    #: "" in files written before it was recorded, or for batches from outside turngym's envs
    env_hash: str = ""
    #: tree rollouts (``turngym.core.pool.tree``): the ``trajectory_id`` of the episode this one
    #: branched from ("" for a root), and the turn it branched at: its steps are turns
    #: ``branch_turn``, ``branch_turn + 1``, ...; the parent alone holds the turns before it
    parent: str = ""
    branch_turn: int | None = None

    @property
    def length(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        names = {f.name for f in dataclasses.fields(Step)}
        data["steps"] = [Step(**{k: v for k, v in s.items() if k in names}) for s in data.get("steps", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def write_jsonl(path: str | os.PathLike, trajectories: Iterable[Trajectory], append: bool = True) -> None:
    """Append trajectories, each with a single ``write`` of one whole line.

    With O_APPEND one write() of a line is not interleaved with other writers, and a killed
    process leaves at most a partial last line, which ``read_jsonl`` skips.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        if append and os.fstat(fd).st_size > 0 and not _ends_with_newline(path):
            os.write(fd, b"\n")  # a line cut by a killed writer must not swallow ours
        for traj in trajectories:
            view = memoryview(_encode_line(traj.to_dict()))
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _encode_line(data: dict[str, Any]) -> bytes:
    """One JSONL line as UTF-8. Any ``str`` is allowed: a lone surrogate (a valid Python str
    that UTF-8 cannot hold) is written as a ``\\ud800`` JSON escape, which reads back exactly."""
    try:
        return (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data, ensure_ascii=True) + "\n").encode("ascii")


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def iter_jsonl(path: str | os.PathLike) -> Iterator[Trajectory]:
    """Trajectories of a JSONL file, skipping lines a killed writer cut off.

    A cut line is a prefix of a JSON object: it starts with ``{`` and fails to parse (as JSON
    or, cut inside a multi-byte character, as UTF-8). Anything else means the file is not a
    trajectory file, which raises ``ValueError`` rather than warning on every line.
    """
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            if not line.startswith(b"{"):
                raise ValueError(
                    f"{path}: not a trajectory file (line {lineno} is not a JSON object; "
                    "expected JSONL written by turngym)"
                )
            try:
                data = json.loads(line)  # ValueError covers JSONDecodeError and UnicodeDecodeError
            except ValueError:
                warnings.warn(f"{path}:{lineno}: skipping a cut-off line (a writer was killed mid-write)", stacklevel=2)
                continue
            if not isinstance(data, dict) or "env_id" not in data:
                raise ValueError(
                    f"{path}: not a trajectory file (line {lineno} has no 'env_id'; expected JSONL written by turngym)"
                )
            yield Trajectory.from_dict(data)


def read_jsonl(path: str | os.PathLike) -> list[Trajectory]:
    return list(iter_jsonl(path))


def to_dataset(trajectories: Iterable[Trajectory]):
    """A Hugging Face ``datasets.Dataset`` with one row per trajectory (needs ``datasets``)."""
    import datasets

    rows = [t.to_dict() for t in trajectories]
    for row in rows:  # free-form dicts become JSON text so Arrow gets one schema
        row["initial_info"] = json.dumps(row["initial_info"])
        row["metadata"] = json.dumps(row["metadata"])
        for s in row["steps"]:
            s["info"] = json.dumps(s["info"])
            s["spans"] = json.dumps(s["spans"])
    return datasets.Dataset.from_list(rows)
