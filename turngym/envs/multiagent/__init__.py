"""Multi-agent text games (PettingZoo Parallel and AEC), and one seat of them as a Gymnasium env.

    from turngym.envs.multiagent import parallel_env, aec_env
    env = parallel_env("negotiation")          # or "auction", "coop_household"

Names are imported on first use: ``import turngym`` imports this package for its registration
module, and must not load the games (the co-op game pulls in the whole household engine).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Auction": "auction", "CoopHousehold": "coop_household", "Negotiation": "negotiation",
            "AECTextEnv": "pettingzoo_api", "ParallelTextEnv": "pettingzoo_api",
            "SingleAgentView": "single_agent", "multiagent_rollout": "single_agent"}


def parallel_env(game: str, split: str = "train", render_mode: str | None = None, **game_kwargs):
    from turngym.envs.multiagent.pettingzoo_api import ParallelTextEnv
    from turngym.envs.multiagent.single_agent import game_class

    return ParallelTextEnv(game_class(game)(**game_kwargs), split=split, render_mode=render_mode)


def aec_env(game: str, split: str = "train", render_mode: str | None = None, **game_kwargs):
    from turngym.envs.multiagent.pettingzoo_api import AECTextEnv
    from turngym.envs.multiagent.single_agent import game_class

    return AECTextEnv(game_class(game)(**game_kwargs), split=split, render_mode=render_mode)


def __getattr__(name: str) -> Any:
    if name == "GAMES":
        value: Any = {"negotiation": __getattr__("Negotiation"), "auction": __getattr__("Auction"),
                      "coop_household": __getattr__("CoopHousehold")}
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: GAMES stays one dict
    return value


__all__ = ["GAMES", "AECTextEnv", "ParallelTextEnv", "SingleAgentView", "aec_env", "multiagent_rollout",
           "parallel_env"]
