"""Registered household ids: the ALFWorld-style default and its presets."""

from __future__ import annotations

import turngym

ENTRY = "turngym.envs.household.env:HouseholdEnv"

PRESETS = {
    "turngym/Household-v0": (
        {}, 50, "ALFWorld-style household: one room, six task types, admissible commands listed"),
    "turngym/Household-Easy-v0": (
        {"kind": "easy", "list_actions_in_observation": True, "reveal_contents": True,
         "lenient": True}, 12,
        "for small models: one room, 4 open receptacles shown with their contents, "
        "pick-and-place only, actions listed each turn, lenient parser"),
    "turngym/Household-NoAdmissible-v0": (
        {"show_admissible": False}, 50, "Household-v0 with the admissible commands hidden"),
    "turngym/Household-House-v0": (
        {"kind": "house"}, 50, "four-room house: `go to` crosses rooms"),
    "turngym/Household-TwoTasks-v0": (
        {"kind": "seq"}, 80, "two household tasks in sequence in one room"),
    "turngym/Household-Paraphrase-v0": (
        {"paraphrase": True}, 50, "Household-v0 with goals paraphrased through a synonym vocabulary"),
}


def register_envs() -> None:
    for env_id, (kwargs, steps, description) in PRESETS.items():
        turngym.register(env_id, ENTRY, kwargs=kwargs, max_episode_steps=steps,
                         description=description, family="household")
