"""Browser: after the Playwright driver (the node process behind Chromium) dies, the
next reset relaunches it, for new envs and old ones; the episode the death cut off is unscorable."""

from __future__ import annotations

import time

import psutil
from browser_pages import needs_browser

import turngym

TASK = "turngym/miniwob.click-test-v0"


def _kill_driver() -> list[int]:
    """Kill this process's Playwright driver(s); only processes this test process started."""
    killed = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "run-driver" in " ".join(proc.cmdline()):
                proc.kill()
                killed.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return killed


@needs_browser
def test_a_dead_driver_is_relaunched():
    old = turngym.make(TASK)
    old.reset(seed=0)
    assert _kill_driver()
    time.sleep(0.3)
    obs, reward, terminated, truncated, info = old.step("noop()")
    assert info["scorable"] is False and truncated  # the cut-off episode: unscorable, never reward 0
    new = turngym.make(TASK)
    obs, info = new.reset(seed=0)  # used to raise BrowserCrashed for the rest of the process
    assert "Click" in obs
    obs, info = old.reset(seed=1)
    _, _, _, _, info = old.step(old.unwrapped.expert_action())
    assert info["scorable"] is True
    new.close()
    old.close()
