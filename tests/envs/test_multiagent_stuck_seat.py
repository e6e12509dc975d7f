"""A seat played by a policy that never makes a valid move ends the episode unscorable instead of
looping forever inside ``SingleAgentView.step`` (or ``reset``, when that seat moves first)."""

from __future__ import annotations

import pytest

from turngym.envs.multiagent.single_agent import SingleAgentView


class Junk:
    """A seat policy whose every move is invalid."""

    def __init__(self):
        self.calls = 0

    def act(self, convs):
        self.calls += 1
        return ["this is not a move"] * len(convs)


@pytest.mark.timeout(60)
def test_a_seat_that_never_moves_validly_ends_the_episode_unscorable():
    # the learner (buyer) opens; the seller it waits for never answers with a valid move
    junk = Junk()
    env = SingleAgentView(game="negotiation", seat="buyer", others=junk)
    obs, info = env.reset(seed=0)
    done, steps = False, 0
    while not done:
        obs, reward, terminated, truncated, info = env.step("say[hello]")  # a valid opening
        done, steps = terminated or truncated, steps + 1
        assert steps < 10
    assert truncated and not terminated
    assert info["scorable"] is False and info["done_reason"] == "seat_stuck"
    assert "no valid move" in obs
    assert junk.calls <= 100  # it gave up after a bounded number of tries


@pytest.mark.timeout(60)
def test_a_stuck_seat_that_moves_first_ends_the_first_step():
    # the buyer (the other seat) opens the negotiation: the learner plays the seller, and reset
    # already waits for the buyer's first move
    junk = Junk()
    env = SingleAgentView(game="negotiation", seat="seller", others=junk)
    obs, info = env.reset(seed=0)
    assert junk.calls > 0 and info["scorable"] is False
    obs, reward, terminated, truncated, info = env.step("accept")
    assert truncated and info["done_reason"] == "seat_stuck" and info["scorable"] is False
    assert info["action_valid"] is False
