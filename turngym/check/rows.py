"""The rows of a check report: one function per check, each playing what it needs on a shared run
(the env, the sampled tasks and the episodes played so far)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from turngym.check.episodes import DEFAULT_MAX_TURNS, Episode, play, replay
from turngym.check.leaks import probe_env
from turngym.check.policies import Factory, expert
from turngym.core.registry import make, spec
from turngym.core.runs import summarize

if TYPE_CHECKING:
    from turngym.check.checks import Thresholds

PROBES = 3  # invalid actions slipped into each probed expert episode
REPLAYS = 3  # episodes replayed by the same-seed check


def _stats(episodes: list[Episode]) -> dict[str, Any]:
    """The core summary (``turngym.core.runs.summarize``) of a row's episodes; one that broke (an
    error in the policy or the harness) counts as unscorable, as an env crash does."""
    summary = summarize(
        [
            {
                "scorable": e.scorable and e.error is None,
                "success": e.success,
                "episode_return": e.episode_return,
                "length": len(e.actions),
            }
            for e in episodes
        ],
        empty=None,
    )
    return {key: summary[key] for key in ("episodes", "unscorable", "mean_return", "success_rate")}


def make_row(
    check: str,
    policy: str,
    episodes: list[Episode],
    threshold: str,
    verdict: str,
    detail: str = "",
    seconds: float = 0.0,
    rewards: bool = True,
) -> dict[str, Any]:
    stats = _stats(episodes)
    if not rewards:  # rows about state and replays, not about what a policy earned
        stats.update(mean_return=None, success_rate=None)
    return {
        "check": check,
        "policy": policy,
        **stats,
        "threshold": threshold,
        "verdict": verdict,
        "detail": detail,
        "seconds": round(seconds, 2),
    }


def _errors(episodes: list[Episode]) -> str:
    errors = [e.error for e in episodes if e.error]
    return f"{len(errors)} episode(s) broke: {errors[0]}" if errors else ""


@dataclass
class CheckRun:
    """One check run: the env, the sampled tasks and what has been played so far."""

    env: Any
    env_id: str
    env_kwargs: dict[str, Any]
    tasks: list[str]
    seeds: list[int]
    thresholds: Thresholds
    played: list[Episode] = field(default_factory=list)  # every episode, for the invalid-action check
    expert: list[Episode] = field(default_factory=list)
    random: list[Episode] = field(default_factory=list)
    reference: float = 1.0  # the expert's mean reward, which the reward limits are shares of
    skill_measure: str = "reward"  # the env's declaration, see SKILL_MEASURES

    def run(self, factory: Factory, probes: int = 0, count: int | None = None) -> list[Episode]:
        pairs = list(zip(self.tasks, self.seeds))[:count]
        episodes = [e for e in (play(self.env, factory, t, s, probes) for t, s in pairs) if e is not None]
        self.played += episodes
        return episodes


def expert_row(r: CheckRun) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        r.expert = r.run(expert)
    except NotImplementedError as exc:
        return make_row("expert", "expert", [], "", "n/a", f"no expert: {exc}")
    if not r.expert:
        return make_row("expert", "expert", [], "", "n/a", "no expert: the env has no expert_action()")
    stats = _stats(r.expert)
    if stats["mean_return"] and stats["mean_return"] > 0:
        r.reference = stats["mean_return"]
    problem = _errors(r.expert) or (f"{stats['unscorable']} unscorable" if stats["unscorable"] else "")
    ok = not problem and stats["success_rate"] is not None and stats["success_rate"] >= r.thresholds.expert_min_success
    return make_row(
        "expert",
        "expert",
        r.expert,
        f"success>={r.thresholds.expert_min_success:.2f}",
        "pass" if ok else "FAIL",
        problem,
        time.perf_counter() - start,
    )


def policy_row(r: CheckRun, check: str, name: str, factory: Factory) -> dict[str, Any] | None:
    """A degenerate or shortcut policy's row; None when it applies to none of the tasks."""
    start = time.perf_counter()
    played = r.run(factory)
    if name == "random-admissible":
        r.random = played
    if not played:
        return None
    stats = _stats(played)
    max_success, ratio = r.thresholds.limits(name)
    reward_limit = ratio * r.reference
    near_floor = stats["success_rate"] is not None and stats["success_rate"] <= max_success
    if r.skill_measure == "success":  # partial credit by design: the reward is reported, not limited
        threshold = f"success<={max_success:.2f} (partial credit)"
    else:
        near_floor = near_floor and stats["mean_return"] <= reward_limit + 1e-9
        threshold = f"success<={max_success:.2f}, reward<={reward_limit:.2f}"
    # unscorable means the infrastructure failed; an agent that can cause that can hide its failures
    problem = _errors(played) or (
        f"{stats['unscorable']} episode(s) made unscorable by the policy's actions" if stats["unscorable"] else ""
    )
    detail = problem or ("" if near_floor else "rewarded: this policy does not solve the task")
    return make_row(
        check,
        name,
        played,
        threshold,
        "pass" if near_floor and not problem else "FAIL",
        detail,
        time.perf_counter() - start,
    )


def invalid_row(r: CheckRun) -> dict[str, Any]:
    """Every action the env called invalid, in every episode played, changed nothing; the expert
    still succeeds with invalid actions slipped between its own."""
    start = time.perf_counter()
    probed = r.run(expert, PROBES, count=REPLAYS) if r.expert else []
    sent = sum(e.invalid_steps for e in r.played)
    changes = [c for e in r.played for c in e.invalid_changes]
    limit = (r.env.spec.max_episode_steps if r.env.spec is not None else None) or DEFAULT_MAX_TURNS
    # an expert that needs nearly all its turns may simply run out of them after the probes
    lost = [
        f"{p.task_id} (ended: {p.done_reason})"
        for e, p in zip(r.expert, probed)
        if e.success and not p.success and len(e.actions) + PROBES < limit
    ]
    problems = []
    if changes:
        problems.append(f"{len(changes)} invalid action(s) changed the state, e.g. {changes[0]}")
    if lost:
        problems.append(f"the expert failed after invalid actions on {', '.join(lost)}")
    if not sent:
        problems.append("the env never reported an action as invalid (action_valid stays True)")
    return make_row(
        "invalid",
        "invalid actions",
        probed,
        "0 state changes",
        "FAIL" if problems else "pass",
        "; ".join(problems) or f"{sent} invalid actions changed nothing",
        time.perf_counter() - start,
        rewards=False,
    )


def seed_row(r: CheckRun) -> dict[str, Any]:
    """Episodes replayed from their seed in a new env and in the same one; reset(seed) alone draws
    the same task and first observation in both."""
    start = time.perf_counter()
    if spec(r.env_id).nondeterministic:
        return make_row("seed", "replay", [], "identical", "n/a", "registered as nondeterministic", rewards=False)
    sample = r.random[:REPLAYS] + r.expert[:1]
    differences = []
    fresh = make(r.env_id, **r.env_kwargs)
    try:
        for episode in sample:
            for where, target in (("a new env", fresh), ("the same env", r.env)):
                why = replay(target, episode)
                if why:
                    differences.append(f"{where}: {why}")
        for s in r.seeds[:REPLAYS]:
            a, b = r.env.reset(seed=s), fresh.reset(seed=s)
            if (a[0], a[1]["task_id"]) != (b[0], b[1]["task_id"]):
                differences.append(f"reset(seed={s}) drew different episodes")
    finally:
        fresh.close()
    return make_row(
        "seed",
        "replay",
        sample,
        "identical",
        "FAIL" if differences else "pass",
        differences[0] if differences else f"{len(sample)} episode(s) replayed twice",
        time.perf_counter() - start,
        rewards=False,
    )


def leak_row(r: CheckRun) -> dict[str, Any]:
    """Can a program in the env's sandbox read any task's hidden data? The leak probe (leaks.py)
    runs through the env's own code tool and searches everything readable for it."""
    start = time.perf_counter()
    found = probe_env(r.env, r.tasks[0], r.seeds[0])
    seconds = time.perf_counter() - start
    if found is None:
        return make_row(
            "leak", "leak-probe", [], "", "n/a", "the env has no tool that runs code", seconds, rewards=False
        )
    threshold = "no hidden tests or reference solutions readable"
    if found["count"]:
        where = "; ".join(f"{label} in {path}" for label, path in found["hits"][:3])
        return make_row(
            "leak",
            "leak-probe",
            [],
            threshold,
            "FAIL",
            f"{found['count']} found: {where}",
            seconds,
            rewards=False,
        )
    if found["missing"]:
        part, tail = found["missing"][0]
        return make_row(
            "leak",
            "leak-probe",
            [],
            threshold,
            "FAIL",
            f"{len(found['missing'])} of the probe's runs did not report (part {part}: {tail[-120:]!r})",
            seconds,
            rewards=False,
        )
    return make_row(
        "leak",
        "leak-probe",
        [],
        threshold,
        "pass",
        f"{found['files']} files searched, none found",
        seconds,
        rewards=False,
    )
