"""Tree rollouts: a group's episodes (the roots), then K continuations branched from env snapshots
at chosen turns of them.

    trajectories = tree_rollout(pool, policy, task_ids, group_size=4, branches=2, points=1)

Each root takes an env snapshot before every turn (``("snapshot", slot)`` ops, answered by the
env's own ``snapshot()``; a few KB and well under a millisecond each). When the last root of a
group ends (or, with ``after`` = n >= 1, once every root has played n turns or ended),
``choose`` (default ``branch_turns``) picks ``points`` (root, turn) pairs among the turns played,
and for each, ``branches`` new episodes restore the root's snapshot before that turn and play on
from there. Waiting for the ends lets the choice see whole episodes; ``after`` lets the branches
play beside the rest of the roots, in the same policy calls, instead of in calls of their own
after them. A branch's conversation is its root's up to that turn, rebuilt from the root's record, so
the policy sees exactly the prompt the root saw: a policy with a prefix cache (``HFPolicy``)
finds the shared history's keys and values already computed, and the K siblings asked in one
call share one encoding of it. Branches start as soon as their group's roots end, while those
keys and values are still cached.

A branch's ``Trajectory`` holds only its own turns (``branch_turn``, ``branch_turn + 1``, ...)
and names its root (``parent``, the root's ``trajectory_id``); the root alone holds the turns
before. Results come back ordered by group: the roots, then the group's branches.

Only envs that declare snapshots (``metadata["snapshots"]``) can branch; the others raise a
ValueError naming the env before anything runs. Faults end only the episode at fault, as in any
rollout; a branch whose host was replaced starts again from its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from turngym.core.policy import Conversation
from turngym.core.pool.envpool import EnvPool
from turngym.core.pool.scheduler import Episode, Rollout
from turngym.core.records import Trajectory
from turngym.core.registry import snapshots_supported
from turngym.core.snapshot import Snapshot

#: ops after which a root's env is snapshotted (the state before its next turn)
_MOVES = ("reset", "step", "env_side")


def branch_turns(group: list[Trajectory], points: int = 1) -> list[tuple[int, int]]:
    """Where to branch a group's finished roots: up to ``points`` (member, turn) pairs, best first.

    The default rule ranks every turn t a scorable member m took a step at by, in order:

    1. t > 0: at turn 0 the group's roots already are K siblings of the reset state;
    2. divergence: another member acted in the same env state (equal ``state_key`` before the
       step) and took another action, so the policy's choice there is genuinely uncertain;
    3. the mean entropy of the tokens m sampled at t, highest first (0 where the policy records
       none, e.g. a scripted one);
    4. the earlier turn, then the lower member (so the choice repeats).

    Fewer pairs come back only when the group has fewer turns."""
    actions: dict[str, set[str]] = {}
    for traj in group:
        if traj.scorable:
            for step in traj.steps:
                actions.setdefault(step.state_key, set()).add(step.action)
    ranked = []
    for m, traj in enumerate(group):
        if not traj.scorable:
            continue
        for t, step in enumerate(traj.steps):
            divergent = len(actions.get(step.state_key, ())) > 1 and bool(step.state_key)
            entropy = sum(step.entropies) / len(step.entropies) if step.entropies else 0.0
            ranked.append(((t == 0, not divergent, -entropy, t, m), (m, t)))
    ranked.sort(key=lambda pair: pair[0])
    return [pair for _, pair in ranked[: max(points, 0)]]


@dataclass
class Branch(Episode):
    """An episode that starts from its root's snapshot before ``branch_turn``."""

    parent: str = ""  # the root's trajectory_id
    branch_turn: int = 0
    snapshot: Snapshot | None = None
    name: str = ""  # its trajectory_id
    #: the root's conversation before the branch turn (built when the branch is made: the root
    #: may still be playing, or be started again after a host failure)
    history: Conversation | None = None


class TreeRollout(Rollout):
    """One tree rollout: the scheduler's loop, with snapshots of the roots and branches added as
    their groups are ready (the methods below extend ``Rollout``'s)."""

    def __init__(self, *args: Any, branches: int, points: int, choose: Callable, after: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.branches, self.points, self.choose, self.after = branches, points, choose, after
        self.snapshots: dict[int, dict[int, Snapshot]] = {}  # root index -> turn -> snapshot
        self.roots: dict[str, list[Episode]] = {}
        for ep in self.todo:
            self.roots.setdefault(ep.group_id, []).append(ep)
        self.ended: set[int] = set()  # indices of the roots that ended
        self.grown: set[str] = set()  # groups whose branches were made
        self.next_index = len(self.todo)

    def start_episodes(self) -> None:
        super().start_episodes()
        for ops in self.outbox.values():
            for i, op in enumerate(ops):
                ep = self.running.get(op[1])
                if op[0] == "reset" and isinstance(ep, Branch):
                    ops[i] = ("restore", op[1], ep.snapshot)
                    traj = ep.trajectory
                    traj.trajectory_id, traj.parent, traj.branch_turn = ep.name, ep.parent, ep.branch_turn

    def send(self) -> None:
        # a root's env is snapshotted after each move, in the same batch (one message per host)
        for h, ops in self.outbox.items():
            if not self.inflight.get(h):
                expanded = []
                for op in ops:
                    expanded.append(op)
                    ep = self.running.get(op[1])
                    if op[0] in _MOVES and not isinstance(ep, Branch) and ep.group_id not in self.grown:
                        expanded.append(("snapshot", op[1]))
                self.outbox[h] = expanded
        super().send()

    def take_result(self, slot: int, status: str, payload: Any) -> None:
        ep = self.running[slot]
        if status == "ok" and isinstance(payload, Snapshot):
            # only the state before this root's next turn (a snapshot that answers after its
            # episode ended finds the slot's next episode not yet reset, or at another turn)
            if ep.conversation is not None and payload.turn == len(ep.trajectory.steps):
                self.snapshots.setdefault(ep.index, {})[payload.turn] = payload
            return
        restored = isinstance(ep, Branch) and ep.conversation is None and status == "ok"
        super().take_result(slot, status, payload)
        if restored:  # the root's conversation up to the branch turn, as the root's policy saw it
            ep.conversation = Conversation(
                messages=list(ep.history.messages),
                info=ep.history.info,
                env_id=ep.history.env_id,
                tools=ep.history.tools,
            )
        elif not isinstance(ep, Branch) and self.after:
            self.grow_when_ready(ep.group_id)

    def finish(self, slot: int) -> None:
        ep = self.running[slot]
        if isinstance(ep, Branch):
            for k, step in enumerate(ep.trajectory.steps):
                step.turn = ep.branch_turn + k
        super().finish(slot)
        if not isinstance(ep, Branch):
            self.ended.add(ep.index)
            self.grow_when_ready(ep.group_id)

    def grow_when_ready(self, group_id: str) -> None:
        """Start a group's branches once every root ended, or (``after`` >= 1) played ``after``
        turns, whichever comes first for each."""
        if group_id in self.grown:
            return
        for root in self.roots[group_id]:
            played = len(root.trajectory.steps) if root.trajectory is not None and root.conversation else 0
            if root.index not in self.ended and not (self.after and played >= self.after):
                return
        self.grown.add(group_id)
        self.todo.extendleft(reversed(self.grow(group_id)))

    def grow(self, group_id: str) -> list[Branch]:
        """The branches of a ready group: ``choose`` over its roots' turns so far."""
        roots = self.roots[group_id]
        out: list[Branch] = []
        for m, turn in self.choose([r.trajectory for r in roots], self.points):
            root = roots[m]
            snapshot = self.snapshots.get(root.index, {}).get(turn)
            if snapshot is None:  # the root failed before it got there
                continue
            history = conversation_before(root.trajectory, turn)
            for k in range(self.branches):
                out.append(
                    Branch(
                        self.next_index,
                        group_id,
                        root.member,
                        root.task_id,
                        root.seed,
                        {},
                        parent=root.trajectory.trajectory_id,
                        branch_turn=turn,
                        snapshot=snapshot,
                        name=f"{root.trajectory.trajectory_id}/{turn}.{k}",
                        history=history,
                    )
                )
                self.next_index += 1
        for root in roots:
            self.snapshots.pop(root.index, None)
        return out

    def run(self) -> list[Trajectory]:
        trajectories = super().run()
        order = {g: i for i, g in enumerate(self.roots)}
        # by group, roots before branches (sorted is stable: within each, the scheduler's order)
        return sorted(trajectories, key=lambda t: (order[t.group_id], bool(t.parent)))


def conversation_before(traj: Trajectory, turn: int) -> Conversation:
    """The Conversation the policy saw before ``turn`` of a root, rebuilt from its record the way
    the scheduler built it (reset messages, then each action and the env's answer)."""
    conv = Conversation.start(traj.env_id, traj.initial_info)
    for step in traj.steps[:turn]:
        conv.add_turn(step.action, step.info)
    return conv


def tree_rollout(
    pool: EnvPool,
    policy: Any,
    tasks: Iterable[str | dict],
    group_size: int = 1,
    branches: int = 2,
    points: int = 1,
    seed: int = 0,
    max_turns: int = 200,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    step_timeout_s: float | None = 300.0,
    episode_timeout_s: float | None = None,
    choose: Callable[[list[Trajectory], int], list[tuple[int, int]]] = branch_turns,
    after: int = 0,
) -> list[Trajectory]:
    """``EnvPool.rollout``'s groups (same arguments) as roots, and per group ``points`` branch
    points with ``branches`` continuations each (see the module docstring); ``choose(roots,
    points)`` picks the (member, turn) pairs. ``after`` >= 1: choose once every root of the group
    has played that many turns (or ended), so the branches play beside the rest of the roots
    instead of after them; 0: once every root ended (the choice sees whole episodes)."""
    for name, value, low in (("branches", branches, 1), ("points", points, 1), ("after", after, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}: must be an int >= {low}, got {value!r}")
    if not snapshots_supported(pool.env_id):
        raise ValueError(
            f"tree rollouts: {pool.env_id} does not support snapshots (metadata['snapshots'] is false; "
            "`turngym list` shows which envs do); use independent rollouts"
        )
    if pool.backend_name == "remote":
        raise ValueError("backend: tree rollouts need 'inline', 'thread', 'process' or 'ray' (not 'remote')")
    episodes = pool.plan(tasks, group_size, seed, max_turns, step_timeout_s, episode_timeout_s)
    return TreeRollout(
        pool.env_id,
        pool._backend,
        pool.slot_host,
        episodes,
        policy,
        on_trajectory,
        step_timeout_s,
        episode_timeout_s,
        pool.env_hash,
        branches=branches,
        points=points,
        choose=choose,
        after=after,
    ).run()
