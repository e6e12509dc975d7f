"""Run the integrity checks on one env and build the report (see ``turngym/check/__init__.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from turngym.check.exploits import SHORTCUTS
from turngym.check.policies import DEGENERATE
from turngym.check.rows import (
    CheckRun,
    expert_row,
    invalid_row,
    leak_row,
    make_row,
    policy_row,
    seed_row,
)
from turngym.core.registry import make, spec
from turngym.core.versions import env_hash

CHECKS = ("expert", "floor", "shortcut", "invalid", "seed", "leak")
# What an env's floor and shortcut policies are judged on (its ``metadata["skill_measure"]``):
# "reward" (the default): success rate and mean reward; "success": success rate alone, for an env
# whose reward pays graded partial credit by design (WebShop's score), where a no-skill purchase
# of the right kind of product earns about half the reward and that is the benchmark, not a leak.
SKILL_MEASURES = ("reward", "success")
DEFAULT_EPISODES = 10


@dataclass
class Thresholds:
    """The rule each check applies (defaults documented in docs/check.md).

    expert: success rate >= ``expert_min_success`` (and every episode scorable).
    floor and shortcut: success rate <= ``max_success`` and mean reward <= ``max_reward_ratio``
    x the expert's mean reward (x 1.0 when the env has no expert); the success rate alone on an
    env that declares ``metadata["skill_measure"] = "success"``. ``policy_limits`` replaces
    both for named policies.
    """

    expert_min_success: float = 1.0
    max_success: float = 0.15
    max_reward_ratio: float = 0.5
    #: policy name -> (max_success, max_reward_ratio), replacing the two defaults for that policy
    policy_limits: dict[str, tuple[float, float]] = field(
        default_factory=lambda: {
            # A shop shortcut fails when it succeeds like a trained agent: over the rule baseline's
            # level (WebShop's: 9.6%), or over issue 16's 30% target for the variant that also clicks
            # the options named in the instruction. WebShop pays partial credit (type, attributes,
            # price) by design (its rule baseline scores 45.6/100): a shop that declares
            # skill_measure "success" (turngym's) is judged on success alone; for one that does not,
            # the reward limit is imitation learning's share of the expert's (59.9 at 29.1% success).
            "shop:search-buy-first": (0.15, 0.6),
            "shop:search-options-buy-first": (0.30, 0.6),
            "shop-pages:search-buy-first": (0.15, 0.6),
            "shop-pages:search-options-buy-first": (0.30, 0.6),
        }
    )

    def limits(self, policy: str) -> tuple[float, float]:
        """(max_success, max_reward_ratio) for a floor or shortcut policy."""
        return self.policy_limits.get(policy, (self.max_success, self.max_reward_ratio))

    def __post_init__(self):
        for name in ("expert_min_success", "max_success", "max_reward_ratio"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be a number in [0, 1], got {value!r}")


@dataclass
class CheckReport:
    env_id: str
    split: str
    episodes: int
    seed: int
    thresholds: Thresholds
    rows: list[dict[str, Any]]
    env_hash: str = ""  # the version of the env checked (turngym.core.versions)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["verdict"] == "FAIL"]

    def row(self, check: str, policy: str) -> dict[str, Any]:
        return next(r for r in self.rows if r["check"] == check and r["policy"] == policy)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "env_hash": self.env_hash,
            "split": self.split,
            "episodes": self.episodes,
            "seed": self.seed,
            "thresholds": dataclasses.asdict(self.thresholds),
            "ok": self.ok,
            "rows": self.rows,
        }


def skill_measure(env) -> str:
    """What ``env``'s floor and shortcut policies are judged on: its ``metadata["skill_measure"]``
    (one of ``SKILL_MEASURES``), "reward" when it declares none."""
    env = getattr(env, "unwrapped", env)
    value = (getattr(env, "metadata", None) or {}).get("skill_measure", "reward")
    if value not in SKILL_MEASURES:
        raise ValueError(
            f"metadata['skill_measure']: {value!r} declared by {type(env).__name__}; "
            f"allowed: {', '.join(SKILL_MEASURES)}"
        )
    return value


def _sample(env, env_id: str, split: str, episodes: int) -> list[str]:
    """``episodes`` task ids spread evenly over the split."""
    try:
        ids = env.task_ids(split)
    except ValueError as exc:
        raise ValueError(str(exc) if str(exc).startswith("split:") else f"split: {exc}") from None
    if not ids:
        raise ValueError(f"split: {split!r} has no tasks for {env_id}")
    n = min(episodes, len(ids))
    return [ids[(i * len(ids)) // n] for i in range(n)]


def _checked_arguments(
    episodes: int, checks: tuple[str, ...] | list[str] | None, policies: list[str] | None
) -> tuple[str, ...]:
    """``checks`` as a tuple (all when None); a ``ValueError`` naming the field when an argument is wrong."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes: must be an integer >= 1, got {episodes!r}")
    checks = tuple(checks or CHECKS)
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"checks: unknown {unknown}; allowed: {', '.join(CHECKS)}")
    known = [*DEGENERATE, *SHORTCUTS]
    unknown = [p for p in policies or [] if p not in known]
    if unknown:
        raise ValueError(f"policies: unknown {unknown}; allowed: {', '.join(known)}")
    return checks


def _policy_rows(
    r: CheckRun, checks: tuple[str, ...], policies: list[str] | None, add: Callable[[dict[str, Any] | None], None]
) -> None:
    """The floor and shortcut rows, each handed to ``add``; the two floor policies whose episodes the
    invalid and seed checks use play even when their rows are not wanted."""
    for check, table in (("floor", DEGENERATE), ("shortcut", SHORTCUTS)):
        added = 0
        for name, factory in table.items():
            wanted = check in checks and (policies is None or name in policies)
            # the invalid and seed checks use the episodes of these two even when not reported
            needed = (
                check == "floor"
                and name in ("random-admissible", "always-invalid")
                and bool({"invalid", "seed"} & set(checks))
            )
            if wanted or needed:
                row = policy_row(r, check, name, factory)
                if wanted and row is not None:
                    add(row)
                    added += 1
        if check == "shortcut" and "shortcut" in checks and not added:
            add(
                make_row(
                    "shortcut",
                    "(none)",
                    [],
                    "",
                    "n/a",
                    "no known shortcut applies to this env",
                    rewards=False,
                )
            )


def check_env(
    env_id: str,
    episodes: int = DEFAULT_EPISODES,
    split: str | None = None,
    seed: int = 0,
    thresholds: Thresholds | None = None,
    checks: tuple[str, ...] | list[str] | None = None,
    policies: list[str] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    **env_kwargs: Any,
) -> CheckReport:
    """Check that ``env_id``'s reward measures skill; see docs/check.md for what each check does.

    ``episodes``: tasks sampled (evenly spread) from ``split`` (default: the env's), played by
    each policy with seeds ``seed``, ``seed + 1``, ... ``checks``: a subset of ``CHECKS``;
    ``policies``: only these degenerate/shortcut policies (names as in the report). ``on_row``
    sees each row as soon as it is done. ``env_kwargs`` go to ``turngym.make``.
    """
    checks = _checked_arguments(episodes, checks, policies)
    thresholds = thresholds or Thresholds()
    spec(env_id)  # an unknown id fails here, with the registry's hint
    env = make(env_id, **env_kwargs)
    rows: list[dict[str, Any]] = []

    def add(row: dict[str, Any] | None) -> None:
        if row is not None:
            rows.append(row)
            if on_row is not None:
                on_row(row)

    try:
        split = split or env.split
        tasks = _sample(env, env_id, split, episodes)
        r = CheckRun(
            env,
            env_id,
            env_kwargs,
            tasks,
            [seed + i for i in range(len(tasks))],
            thresholds,
            skill_measure=skill_measure(env),
        )
        # the expert plays whenever its episodes are used: its reward is what the floor limits are
        # shares of (not on an env judged on success alone), the invalid and seed checks replay it
        if {"expert", "invalid", "seed"} & set(checks) or r.skill_measure == "reward":
            row = expert_row(r)
            if "expert" in checks:
                add(row)
        _policy_rows(r, checks, policies, add)
        if "invalid" in checks:
            add(invalid_row(r))
        if "seed" in checks:
            add(seed_row(r))
        if "leak" in checks:
            add(leak_row(r))
    finally:
        env.close()
    return CheckReport(
        env_id=env_id,
        split=split,
        episodes=len(tasks),
        seed=seed,
        thresholds=thresholds,
        rows=rows,
        env_hash=env_hash(env_id, **env_kwargs),
    )
