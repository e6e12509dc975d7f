"""Browser reliability: a killed browser, a hung page, 500 episodes without memory growth, and
envs shared by threads. Every failure must end the episode ``scorable=False``, never reward 0."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from browser_pages import BROWSER_MARKS, HANG_PAGE, bid_of, pages_env

import turngym
from turngym.agents.basic import ExpertPolicy
from turngym.core.pool import EnvPool
from turngym.envs.browser.runtime import get_runtime

pytestmark = BROWSER_MARKS


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def memory_kib() -> int:
    """RSS of this process plus the browser and all its child processes (renderers, GPU...)."""
    browser = get_runtime().browser_pid()
    return _rss_kib(os.getpid()) + sum(_rss_kib(p) for p in _descendants(browser))


def test_killed_browser_ends_the_episode_unscorable_and_the_next_reset_works():
    env = turngym.make("turngym/miniwob.login-user-v0")
    try:
        env.reset(seed=0)
        env.step(env.expert_action())
        os.kill(get_runtime().browser_pid(), signal.SIGKILL)
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        assert truncated and not terminated and reward == 0.0
        assert info["scorable"] is False and info["done_reason"] == "browser_crashed"
        assert "browser failure" in obs
        with pytest.raises(turngym.ResetNeeded):  # the ended episode is not stepped again
            env.step("noop()")
        launches = get_runtime().launches
        env.reset(seed=1)  # a fresh browser
        assert get_runtime().launches == launches + 1
        for _ in range(5):
            _, reward, terminated, _, info = env.step(env.expert_action())
            if terminated:
                break
        assert terminated and reward == 1.0 and info["scorable"]
    finally:
        env.close()


def test_hung_page_is_recovered_by_the_watchdog():
    env = pages_env({"/": HANG_PAGE}, watchdog_s=3.0)
    try:
        obs, _ = env.reset(seed=0)
        hang = bid_of(obs, 'button "Hang"')
        obs, reward, terminated, truncated, info = env.step(f"click('{hang}')")
        assert truncated and reward == 0.0
        assert info["scorable"] is False and info["done_reason"] == "page_hung"
        obs, info = env.reset(seed=1)  # a new context, same browser
        assert info["scorable"]
        fine = bid_of(obs, 'button "Fine"')
        obs, _, _, _, info = env.step(f"click('{fine}')")
        assert info["action_valid"] and 'button "ok"' in obs
    finally:
        env.close()


def test_500_episodes_without_memory_growth():
    env = turngym.make("turngym/miniwob.click-test-v0", recycle_every=50)
    try:
        baseline = None
        for episode in range(500):
            env.reset(seed=episode)
            _, reward, terminated, _, info = env.step(env.expert_action())
            assert terminated and reward == 1.0 and info["scorable"]
            if episode == 99:  # after warm-up: caches filled, two context generations seen
                baseline = memory_kib()
        final = memory_kib()
        assert final <= baseline * 1.20, f"memory grew from {baseline} KiB to {final} KiB"
    finally:
        env.close()


def test_envs_in_threads_share_one_browser():
    pool = EnvPool("turngym/miniwob.click-option-v0", num_envs=3, backend="thread")
    try:
        tasks = [f"click-option/{k}" for k in range(6)]
        trajectories = pool.rollout(ExpertPolicy(), tasks, group_size=1, seed=0)
    finally:
        pool.close()
    assert len(trajectories) == 6 and all(t.success and t.scorable for t in trajectories)
    assert sum(1 for t in threading.enumerate() if t.name == "turngym-browser") == 1
