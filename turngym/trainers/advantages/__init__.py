"""Advantage estimators: each a pure function of a batch of Trajectories (math in its docstring).

``ESTIMATORS`` maps a config name to the function. Estimators in ``CRITIC_ESTIMATORS`` also take
the value head's predictions; ``empg.modulate`` composes with any of them.
"""

from __future__ import annotations

from turngym.trainers.advantages import empg, gigpo, graph, grpo, hgpo, hiper, rloo, turn_gae

ESTIMATORS = {
    "grpo": grpo.advantages,
    "rloo": rloo.advantages,
    "gigpo": gigpo.advantages,
    "hgpo": hgpo.advantages,
    "graph": graph.advantages,
    "turn_gae": turn_gae.advantages,
    "hiper": hiper.advantages,
}
CRITIC_ESTIMATORS = ("turn_gae", "hiper")

__all__ = ["ESTIMATORS", "CRITIC_ESTIMATORS", "empg", "gigpo", "graph", "grpo", "hgpo", "hiper", "rloo",
           "turn_gae"]
