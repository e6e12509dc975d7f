"""Built-in environment families. Each family registers its ids in ``register_envs()`` of its
own ``registration.py``; entry points are strings, so importing turngym imports no engine."""

from __future__ import annotations

import importlib

FAMILIES: list[str] = ["household"]


def register_builtin_envs() -> None:
    for family in FAMILIES:
        importlib.import_module(f"turngym.envs.{family}.registration").register_envs()
