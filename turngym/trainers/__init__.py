"""turngym.trainers: grouped rollouts, advantage estimators, losses, SFT and the RL loop.

Heavy imports (torch, transformers) happen only when ``train`` runs.
"""

from __future__ import annotations

from turngym.trainers.config import TrainConfig, load_config


def train(cfg: TrainConfig, **kwargs):
    from turngym.trainers.loop import train as _train

    return _train(cfg, **kwargs)


__all__ = ["TrainConfig", "load_config", "train"]
