"""Advantage estimators: each a pure function of a batch of Trajectories (math in its docstring),
declared to the trainer as an ``Estimator`` (see ``estimator.py``).

``ESTIMATORS`` maps a config name (``rl.estimator``) to its declaration, in the order the config
lists them; ``empg.modulate`` composes with any of them (``rl.empg``). ``sibling`` (credit from
the siblings of tree rollouts) needs batches that branch from env snapshots (``rl.branches >= 1``),
and tree rollouts need it (``check_tree``).
"""

from __future__ import annotations

from turngym.trainers.advantages import empg, gigpo, graph, grpo, hgpo, hiper, rloo, sibling, turn_gae
from turngym.trainers.advantages.estimator import Advantages, Batch, Estimator

#: estimators whose step groups are the siblings of tree rollouts (a config needs rl.branches >= 1)
TREE_ESTIMATORS = ("sibling",)

ESTIMATORS: dict[str, Estimator] = {
    e.name: e
    for e in (
        grpo.ESTIMATOR,
        rloo.ESTIMATOR,
        gigpo.ESTIMATOR,
        hgpo.ESTIMATOR,
        graph.ESTIMATOR,
        turn_gae.ESTIMATOR,
        hiper.ESTIMATOR,
        sibling.ESTIMATOR,
    )
}


def check_tree(estimator: str, branches: int) -> None:
    """A tree estimator exactly when the rollouts branch (one-line errors otherwise): the others
    would score a branch by its own turns alone, leaving out the turns it shares with its root."""
    branching = branches > 0
    if (estimator in TREE_ESTIMATORS) == branching:
        return
    allowed = ", ".join(n for n in ESTIMATORS if (n in TREE_ESTIMATORS) == branching)
    why = (
        "cannot credit tree rollouts (a branch's own return leaves out the turns it shares with its root)"
        if branching
        else "needs tree rollouts (rl.branches >= 1)"
    )
    raise ValueError(f"rl.estimator: {estimator!r} {why}; with rl.branches={branches} allowed: {allowed}")


__all__ = [
    "ESTIMATORS",
    "TREE_ESTIMATORS",
    "Advantages",
    "Batch",
    "Estimator",
    "check_tree",
    "empg",
    "gigpo",
    "graph",
    "grpo",
    "hgpo",
    "hiper",
    "rloo",
    "sibling",
    "turn_gae",
]
