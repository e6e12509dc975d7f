"""Turn Trajectory JSONL into what the viewer and the report show.

Everything here is a plain function of records: episode summaries (one row of the episode
list), episode views (the turns, trimmed of token ids), the alignment of a group's
rollouts on shared ``state_key``s, and ``read_run``: a run's episodes, per-file rates, metrics
and env versions, as the report shows them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from turngym.core.records import Step, Trajectory, iter_jsonl
from turngym.core.runs import read_metrics, summarize
from turngym.core.versions import hashes_note

#: the span names the viewer colours; others are shown with a neutral colour
SPAN_NAMES = ("think", "subgoal", "switch", "action", "tool_call")
#: where a step's screenshot (base64 PNG) may sit in ``info["extra"]``
SCREENSHOT_KEYS = ("screenshot_png_b64", "screenshot_png_base64")


def find_run_files(path: str | Path) -> tuple[Path, list[Path]]:
    """The root folder and the trajectory files under ``path`` (a JSONL file or a run dir).

    A run dir has ``rollouts/*.jsonl`` and ``eval/*.jsonl``; loose ``*.jsonl`` files at its top
    (other than ``metrics.jsonl``) count too.
    """
    path = Path(path)
    if path.is_file():
        return path.parent, [path]
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or run directory")
    files = [p for p in sorted(path.glob("*.jsonl")) if p.name != "metrics.jsonl"]
    for sub in ("rollouts", "eval"):
        files += sorted((path / sub).glob("*.jsonl"))
    return path, files


def task_type(traj: Trajectory) -> str:
    """The reset's ``extra["task_type"]`` (household, toolqa); ToolQA files written before it was
    named so carry ``extra["kind"]``."""
    extra = (traj.initial_info or {}).get("extra") or {}
    return str(extra.get("task_type") or extra.get("kind") or traj.metadata.get("task_type") or "-")


def split_of(traj: Trajectory, source: str = "", splits: dict[str, str] | None = None) -> str:
    """The task split: recorded by the writer when it can, else read off the file's place.

    ``splits`` maps a run folder ("rollouts", "eval") to the split its files hold, as the run's
    config names them (see ``config_splits``). A trainer's ``eval/update_0003.jsonl`` holds the
    eval split, not a split called "update_0003".
    """
    extra = (traj.initial_info or {}).get("extra") or {}
    split = traj.metadata.get("split") or extra.get("split")
    if split:
        return str(split)
    parts = Path(source).parts
    folder = parts[0] if len(parts) > 1 else ""
    if splits and splits.get(folder):
        return splits[folder]
    if folder == "rollouts":
        return "train"
    if folder == "eval":
        return "eval" if update_number(source) is not None else Path(source).stem
    return "-"


def config_splits(root: str | Path) -> dict[str, str]:
    """{"rollouts": train split, "eval": eval split} from ``RUN_DIR/config.yaml`` when it names them."""
    path = Path(root) / "config.yaml"
    if not path.is_file():
        return {}
    import yaml  # only runs that have a config pay for the import

    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return {}
    if not isinstance(config, dict):
        return {}
    env = config.get("env") if isinstance(config.get("env"), dict) else {}
    found = {}
    for folder, key in (("rollouts", "train_split"), ("eval", "eval_split")):
        value = env.get(key, config.get(key))
        if isinstance(value, str) and value:
            found[folder] = value
    return found


def update_number(source: str) -> int | None:
    """N for a trainer's per-update file ``.../update_000N.jsonl``, else None."""
    m = re.fullmatch(r"update_(\d+)", Path(source).stem)
    return int(m.group(1)) if m else None


def invalid_actions(traj: Trajectory) -> int:
    return sum(1 for s in traj.steps if s.info.get("action_valid") is False)


def summarize_episode(
    traj: Trajectory, index: int, source: str = "", splits: dict[str, str] | None = None
) -> dict[str, Any]:
    """One row of the episode list."""
    advantages = [s.advantage for s in traj.steps if s.advantage is not None]
    return {
        "index": index,
        "trajectory_id": traj.trajectory_id or f"#{index}",
        "group_id": traj.group_id,
        "env_id": traj.env_id,
        "env_hash": traj.env_hash,
        "task_id": traj.task_id,
        "task_type": task_type(traj),
        "split": split_of(traj, source, splits),
        "seed": traj.seed,
        "length": traj.length,
        "episode_return": _finite(traj.episode_return),
        "success": bool(traj.success),
        "scorable": bool(traj.scorable),
        "invalid_actions": invalid_actions(traj),
        "estimator": str(traj.metadata.get("estimator", "")),
        "has_advantage": bool(advantages),
        "max_abs_advantage": max((abs(a) for a in advantages), default=0.0),
        "done_reason": (traj.steps[-1].info.get("done_reason") if traj.steps else None) or "",
        "parent": traj.parent,  # tree rollouts: the root it branched from ("" for a root)
        "branch_turn": traj.branch_turn,
    }


def step_view(step: Step) -> dict[str, Any]:
    """A turn as the page shows it: no token ids, tool traffic and screenshot pulled out."""
    info = step.info or {}
    extra = info.get("extra") or {}
    messages = info.get("messages") or []
    tool_messages = [m for m in messages if m.get("role") == "tool" or m.get("tool_calls")]
    answer = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    screenshot = next((extra[k] for k in SCREENSHOT_KEYS if isinstance(extra.get(k), str)), None)
    reply = step.reply if isinstance(step.reply, str) else step.action
    return {
        "turn": step.turn,
        "observation": step.observation,
        "action": step.action,  # what the env received
        "reply": reply,  # what the model wrote; the spans index it
        "spans": {k: list(v) for k, v in (step.spans or {}).items() if _is_span(v, len(reply))},
        "reward": _finite(step.reward),
        "reward_components": info.get("reward_components") or {},
        "advantage": None if step.advantage is None else _finite(step.advantage),
        "state_key": step.state_key,
        "next_state_key": info.get("state_key", ""),
        "action_valid": info.get("action_valid", True) is not False,
        "parse_error": info.get("parse_error"),
        "tool_messages": tool_messages,
        "answer": answer,  # the env's reply to this action (the next observation)
        "terminated": step.terminated,
        "truncated": step.truncated,
        "done_reason": info.get("done_reason"),
        "is_success": bool(info.get("is_success", False)),
        "progress": info.get("progress"),
        "screenshot_png_b64": screenshot,
        "num_tokens": len(step.completion_ids),
    }


def episode_view(
    traj: Trajectory, index: int, source: str = "", splits: dict[str, str] | None = None
) -> dict[str, Any]:
    initial_messages = (traj.initial_info or {}).get("messages") or []
    system = next((m.get("content", "") for m in initial_messages if m.get("role") == "system"), "")
    return {
        **summarize_episode(traj, index, source, splits),
        "initial_observation": traj.initial_observation,
        "instructions": system,
        "metadata": {k: v for k, v in traj.metadata.items() if k != "error"},
        "error": traj.metadata.get("error"),
        "steps": [step_view(s) for s in traj.steps],
    }


def align_group(sequences: list[list[str]]) -> list[dict[str, Any]]:
    """Align the rollouts of a group so that steps taken in the same state share a row.

    ``sequences[m]`` is member m's list of state keys (one per step). Members are added one at
    a time: each is matched to the rows built so far by a longest common subsequence on the
    keys (a row matches a step when their keys are equal), and its unmatched steps become new
    rows in order. Returns rows ``{"state_key", "cells"}`` where ``cells[m]`` is member m's step
    index in that row or None.
    """
    rows: list[dict[str, Any]] = []
    for m, keys in enumerate(sequences):
        row_keys = [r["state_key"] for r in rows]
        matches = _lcs_pairs(row_keys, keys)
        merged: list[dict[str, Any]] = []
        r = s = 0
        for mr, ms in matches + [(len(rows), len(keys))]:
            # rows before the match stay as they are, steps before it get rows of their own
            merged.extend(rows[r:mr])
            for j in range(s, ms):
                merged.append({"state_key": keys[j], "cells": [None] * m + [j]})
            if mr < len(rows):
                merged.append(rows[mr])
                rows[mr]["cells"].append(ms)
            r, s = mr + 1, ms + 1
        for row in merged:  # rows this member skipped
            if len(row["cells"]) == m:
                row["cells"].append(None)
        rows = merged
    for row in rows:
        row["shared"] = sum(c is not None for c in row["cells"])
    return rows


def _lcs_pairs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Index pairs of one longest common subsequence of a and b (empty keys never match)."""
    n, k = len(a), len(b)
    table = [[0] * (k + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(k - 1, -1, -1):
            if a[i] and a[i] == b[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < k:
        if a[i] and a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def load_file(path: Path) -> list[Trajectory]:
    """The trajectories of a JSONL file; a line that is JSON but not a trajectory is a ValueError."""
    if not path.stat().st_size:
        return []
    try:
        trajs = list(iter_jsonl(path))
    except (TypeError, AttributeError, KeyError) as e:  # what from_dict raises on a foreign row
        raise ValueError(f"{path}: not a trajectory file ({type(e).__name__}: {e})") from None
    for traj in trajs:  # the pages never show token-level data; a viewer keeps files in memory
        for s in traj.steps:
            s.prompt_ids, s.logprobs, s.entropies, s.loss_mask = [], [], [], []
    return trajs


def count_episodes(path: Path) -> int:
    """Trajectories in a JSONL file, without parsing them (a cut-off last line is not counted)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            count += line.endswith(b"\n") and bool(line.strip())
    return count


def _is_span(value: Any, length: int) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(x, int) for x in value)
        and 0 <= value[0] <= value[1] <= length
    )


def _finite(x: Any) -> float | None:
    """JSON has no NaN/inf: show them as missing rather than break the page."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def read_run(path: Path) -> dict[str, Any]:
    root, files = find_run_files(path)
    splits = config_splits(root) if path.is_dir() else {}
    episodes: list[dict[str, Any]] = []
    per_file: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for f in files:
        name = f.relative_to(root).as_posix()
        try:
            trajs = load_file(f)
        except ValueError as e:  # one bad file must not cost the report of a whole run
            unreadable.append(str(e))
            continue
        rows = [summarize_episode(t, i, name, splits) | {"file": name} for i, t in enumerate(trajs)]
        episodes += rows
        folder = name.split("/")[0] if "/" in name else ""
        per_file.append({"file": name, "folder": folder, **episode_rates(rows), "update": update_number(name)})
    metrics = read_metrics(root / "metrics.jsonl") if path.is_dir() else []
    # every file's and every metrics row's env version, to say so when they differ
    versions = [(f"{e['file']} {e['trajectory_id']}", e["env_id"], e["env_hash"]) for e in episodes]
    versions += [
        (f"metrics.jsonl update {r.get('update')}", str(r.get("env_id")), r.get("env_hash"))
        for r in metrics
        if isinstance(r.get("env_hash"), str)
    ]
    config = (
        (root / "config.yaml").read_text(encoding="utf-8", errors="replace")
        if path.is_dir() and (root / "config.yaml").is_file()
        else ""
    )
    return {
        "path": path,
        "root": root,
        "episodes": episodes,
        "per_file": per_file,
        "metrics": metrics,
        "config": config,
        "unreadable": unreadable,
        "env_hashes": sorted({h for _, _, h in versions if h}),
        "version_note": hashes_note(versions),
    }


def episode_rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``summarize`` over viewer episode rows (None where nothing is scorable), with the turns of
    all of them and the share of those whose action the env rejected."""
    steps = sum(r["length"] for r in rows)
    return {
        **summarize(rows, empty=None),
        "steps": steps,
        "invalid_rate": sum(r["invalid_actions"] for r in rows) / steps if steps else None,
    }


def latest_files(per_file: list[dict[str, Any]]) -> list[str]:
    """The files that say how the agent does now: of a trainer's per-update files in a folder only
    the last update's, every other file whole."""
    last: dict[str, int] = {}
    for f in per_file:
        if f["update"] is not None:
            last[f["folder"]] = max(last.get(f["folder"], -1), f["update"])
    return [f["file"] for f in per_file if f["update"] is None or f["update"] == last[f["folder"]]]
