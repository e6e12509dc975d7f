"""Multi-agent text games (PettingZoo Parallel and AEC), and one seat of them as a Gymnasium env.

    from turngym.envs.multiagent import parallel_env, aec_env
    env = parallel_env("negotiation")          # or "auction", "coop_household"
"""

from __future__ import annotations

from turngym.envs.multiagent.auction import Auction
from turngym.envs.multiagent.coop_household import CoopHousehold
from turngym.envs.multiagent.negotiation import Negotiation
from turngym.envs.multiagent.pettingzoo_api import AECTextEnv, ParallelTextEnv
from turngym.envs.multiagent.single_agent import SingleAgentView, multiagent_rollout

GAMES = {"negotiation": Negotiation, "auction": Auction, "coop_household": CoopHousehold}


def parallel_env(game: str, split: str = "train", render_mode: str | None = None, **game_kwargs):
    from turngym.envs.multiagent.single_agent import game_class

    return ParallelTextEnv(game_class(game)(**game_kwargs), split=split, render_mode=render_mode)


def aec_env(game: str, split: str = "train", render_mode: str | None = None, **game_kwargs):
    from turngym.envs.multiagent.single_agent import game_class

    return AECTextEnv(game_class(game)(**game_kwargs), split=split, render_mode=render_mode)


__all__ = ["GAMES", "AECTextEnv", "ParallelTextEnv", "SingleAgentView", "aec_env", "multiagent_rollout",
           "parallel_env"]
