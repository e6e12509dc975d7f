"""Register tools-mode variants of text-command envs (``turngym/Household-v0`` ->
``turngym/Household-tools-v0``). Light on purpose: imported by ``import turngym``."""

from __future__ import annotations

from typing import Any

from turngym.core.registry import _REGISTRY, register

#: base id -> verb table: the built-in ids that get a tools-mode twin when they are registered.
#: Other ids of these families can call ``register_tools_variant`` themselves.
BUILTIN_TOOLS_VARIANTS: dict[str, str] = {"turngym/Household-v0": "household", "turngym/Shop-v0": "shop"}
ENTRY_POINT = "turngym.tools.modes:ToolsModeEnv"


def tools_id(base_id: str) -> str:
    """``ns/Name-vN`` -> ``ns/Name-tools-vN``."""
    head, sep, version = base_id.rpartition("-v")
    if not sep or not version.isdigit():
        return base_id + "-tools"
    return f"{head}-tools-v{version}"


def register_tools_variant(base_id: str, verbs: str | list[dict[str, Any]], id: str | None = None,
                           **options: Any):
    """Register a tools-mode id for a registered text env; returns its EnvSpec.

    ``options`` go to ``ToolsModeEnv`` (e.g. ``on_error="end"``, ``plain_commands=False``).
    """
    base = _REGISTRY.get(base_id)
    if base is None:
        raise ValueError(f"base_id: {base_id!r} is not registered")
    if not isinstance(base.entry_point, str):
        raise ValueError(f"base_id: {base_id!r} has a callable entry point; tools mode needs 'module:Class'")
    kwargs = {"base_id": base_id, "base_entry_point": base.entry_point, "base_kwargs": dict(base.kwargs),
              "verbs": verbs, **options}
    return register(id or tools_id(base_id), ENTRY_POINT, kwargs=kwargs,
                    max_episode_steps=base.max_episode_steps,
                    description=f"{base.description} (tools mode)".strip(), family=base.family,
                    modality=base.modality, needs=base.needs, nondeterministic=base.nondeterministic)


def register_builtin_tools_variants() -> None:
    """Tools-mode twins of the ids in BUILTIN_TOOLS_VARIANTS that are registered.

    Called from ``turngym.envs.register_builtin_envs`` after the families registered, so it
    registers nothing for a family that is not installed.
    """
    for base_id, table in BUILTIN_TOOLS_VARIANTS.items():
        if base_id in _REGISTRY and tools_id(base_id) not in _REGISTRY:
            register_tools_variant(base_id, table)
