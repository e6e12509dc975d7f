"""Issue 18, EnvPool: deadlines, and faults that never lose other episodes or deadlock a backend.

Each backend meets an env that hangs (pure Python), calls ``sys.exit``, and (process, Ray) calls
``os._exit``; every other episode finishes and succeeds, the faulty ones come back
``scorable=False`` with the reason, and the pool keeps working afterwards.
"""

from __future__ import annotations

import faulty_env
import pytest
from faulty_env import FaultPolicy

import turngym
from turngym.agents import ExpertPolicy

faulty_env.register()
ENV = "turngym-tests/Faulty-v0"
TASKS = [f"counter-{i}" for i in (1, 2, 3, 4, 7, 8, 9, 11)]  # 2: hang, 3: exit, 4: die


def _check(trajs, faults: dict[str, str]) -> None:
    assert [t.task_id for t in trajs] == TASKS  # nothing lost, order kept
    for t in trajs:
        if t.task_id in faults:
            assert not t.scorable, t.task_id
            assert faults[t.task_id] in t.metadata["error"], (t.task_id, t.metadata["error"])
        else:
            assert t.scorable and t.success, (t.task_id, t.metadata.get("error"))


@pytest.mark.parametrize("backend", ["inline", "thread", "process"])
@pytest.mark.slow
def test_hang_and_sys_exit_mark_only_their_episode_unscorable(backend):
    with turngym.EnvPool(ENV, num_envs=3, backend=backend, num_workers=2) as pool:
        trajs = pool.rollout(FaultPolicy(only=("hang", "exit")), TASKS, step_timeout_s=1.0)
        _check(trajs, {"counter-2": "step timed out", "counter-3": "SystemExit"})
        again = pool.rollout(ExpertPolicy(), ["counter-1", "counter-7"], step_timeout_s=5)
        assert all(t.scorable and t.success for t in again)


def test_process_worker_os_exit_loses_no_healthy_episode_on_the_same_worker():
    # two envs on one worker: the healthy one's env dies with the worker and is run again
    with turngym.EnvPool(ENV, num_envs=2, backend="process", num_workers=1) as pool:
        trajs = pool.rollout(FaultPolicy(only=("die",)), TASKS, step_timeout_s=30)
    _check(trajs, {"counter-4": "exit code 1"})


@pytest.mark.slow
def test_process_backend_hang_kills_and_replaces_the_worker():
    with turngym.EnvPool(ENV, num_envs=2, backend="process", num_workers=1) as pool:
        pid_before = {p.pid for p in pool._backend.procs}
        trajs = pool.rollout(FaultPolicy(only=("hang",)), TASKS, step_timeout_s=1.0)
        assert {p.pid for p in pool._backend.procs} != pid_before
    _check(trajs, {"counter-2": "step timed out"})


@pytest.mark.parametrize("backend", ["inline", "thread", "process"])
@pytest.mark.slow
def test_episode_deadline(backend):
    # counter-6 answers every step, slowly (0.4 s): only the per-episode deadline stops it
    # (inline runs every slot in this thread, so one slot: the slow env would eat the others' time)
    tasks = ["counter-1", "counter-6", "counter-7"]
    with turngym.EnvPool(ENV, num_envs=1 if backend == "inline" else 2, backend=backend) as pool:
        trajs = pool.rollout(FaultPolicy(only=("slow",)), tasks, step_timeout_s=5, episode_timeout_s=1.5)
    assert [t.scorable for t in trajs] == [True, False, True]
    assert "episode timed out" in trajs[1].metadata["error"]


@pytest.mark.slow
def test_ray_backend_survives_hang_exit_and_os_exit():
    pytest.importorskip("ray")
    import ray

    try:
        # one actor per slot: each fault is seen op by op
        with turngym.EnvPool(ENV, num_envs=2, backend="ray", num_workers=2) as pool:
            trajs = pool.rollout(FaultPolicy(only=("hang", "exit", "die")), TASKS, step_timeout_s=3)
        _check(trajs, {"counter-2": "step timed out", "counter-3": "SystemExit", "counter-4": "died"})
        # three slots on one actor: a batch hides the culprit, so the host is isolated and the
        # fault found on the rerun; healthy episodes are still never lost
        with turngym.EnvPool(ENV, num_envs=3, backend="ray", num_workers=1) as pool:
            trajs = pool.rollout(FaultPolicy(only=("hang", "die")), TASKS, step_timeout_s=2)
        _check(trajs, {"counter-2": "step timed out", "counter-4": "died"})
    finally:
        ray.shutdown()


def test_timeout_arguments_are_checked():
    with turngym.EnvPool(ENV, num_envs=1, backend="inline") as pool:
        with pytest.raises(ValueError, match="step_timeout_s"):
            pool.rollout(ExpertPolicy(), ["counter-1"], step_timeout_s=0)
        with pytest.raises(ValueError, match="episode_timeout_s"):
            pool.rollout(ExpertPolicy(), ["counter-1"], episode_timeout_s=-1)


@pytest.mark.slow
def test_inline_step_deadline_keeps_an_outer_alarm():
    """pytest-timeout and user code arm SIGALRM too: the inline deadline must not cancel it."""
    import signal
    import time

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        start = time.monotonic()
        with turngym.EnvPool(ENV, num_envs=1, backend="inline") as pool:
            trajs = pool.rollout(ExpertPolicy(), ["counter-1"], step_timeout_s=1.0)
        assert trajs[0].success
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 3.0 - (time.monotonic() - start) + 0.05  # still armed, time kept
        time.sleep(left + 0.2)
        assert len(fired) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
