"""Built-in environment families. Each family registers its ids in ``register_envs()`` of its
own ``registration.py``; entry points are strings, so importing turngym imports no engine."""

from __future__ import annotations

import importlib

FAMILIES: list[str] = ["household", "shop", "browser", "code", "toolqa", "multiagent"]


def register_builtin_envs() -> None:
    for family in FAMILIES:
        importlib.import_module(f"turngym.envs.{family}.registration").register_envs()
    # tools-mode twins (turngym/Household-tools-v0, ...) of whichever text families registered
    from turngym.tools.registration import register_builtin_tools_variants

    register_builtin_tools_variants()
