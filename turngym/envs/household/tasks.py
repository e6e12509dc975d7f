"""The six ALFWorld task types: goal checks (on types, not instances), progress, goal phrasings,
and the feasible goals of a task type on given floor plans (what a blueprint draws from).

A ``Goal`` is (task type, object type, receptacle type); for ``look_at_obj_in_light`` the third
field is the lamp type. Checks read a ``World`` (engine.py) and hold for any agent, so a team of
agents sharing one world solves a goal together.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from turngym.envs.household import data

if TYPE_CHECKING:
    from turngym.envs.household.engine import World
    from turngym.envs.household.generator import RoomLayout

LOOK = "look_at_obj_in_light"
TWO = "pick_two_obj_and_place"
# task type -> the flag set of World the object must carry ("" = none)
TREATMENT = {"pick_clean_then_place": "clean", "pick_heat_then_place": "hot", "pick_cool_then_place": "cool"}
TREATMENT_VERB = {"clean": "clean", "hot": "heat", "cool": "cool"}
TREATMENT_APPLIANCES = {"clean": data.CLEANERS, "hot": data.HEATERS, "cool": data.COOLERS}


class Goal(NamedTuple):
    task_type: str
    obj_type: str
    rec_type: str  # the lamp type for look_at_obj_in_light


# Two phrasings per task type, in ALFWorld's style; {o} object, {r} receptacle or lamp.
PHRASINGS = {
    "pick_and_place_simple": ("put a {o} in {r}.", "put some {o} on {r}."),
    LOOK: ("look at {o} under the {r}.", "examine the {o} with the {r}."),
    "pick_clean_then_place": ("put a clean {o} in {r}.", "clean some {o} and put it in {r}."),
    "pick_heat_then_place": ("put a hot {o} in {r}.", "heat some {o} and put it in {r}."),
    "pick_cool_then_place": ("put a cool {o} in {r}.", "cool some {o} and put it in {r}."),
    TWO: ("put two {o} in {r}.", "find two {o} and put them in {r}."),
}
# Extra phrasings for the paraphrased-goal preset (verbs vary too, not only the nouns).
PARAPHRASES = {
    "pick_and_place_simple": (
        "place a {o} in the {r}.",
        "move a {o} to the {r}.",
        "get a {o} and leave it in the {r}.",
    ),
    LOOK: ("inspect a {o} by the light of the {r}.", "hold a {o} under a lit {r}."),
    "pick_clean_then_place": (
        "wash a {o} and set it in the {r}.",
        "rinse some {o}, then store it in the {r}.",
    ),
    "pick_heat_then_place": ("warm up a {o} and place it in the {r}.", "bring a heated {o} to the {r}."),
    "pick_cool_then_place": ("chill a {o} and place it in the {r}.", "bring a chilled {o} to the {r}."),
    TWO: ("place a pair of {o} in the {r}.", "put two {o}s into the {r}."),
}


def goal_text(goal: Goal, phrasing: int, rng: random.Random | None = None) -> str:
    """The goal in words; with ``rng``, a paraphrase with synonyms for the nouns."""
    if rng is None:
        return PHRASINGS[goal.task_type][phrasing].format(o=goal.obj_type, r=goal.rec_type)
    template = rng.choice(PHRASINGS[goal.task_type] + PARAPHRASES[goal.task_type])
    return template.format(o=_synonym(goal.obj_type, rng), r=_synonym(goal.rec_type, rng))


def _synonym(name: str, rng: random.Random) -> str:
    return rng.choice((name, *data.SYNONYMS.get(name, ())))


def goal_met(world: World, goal: Goal) -> bool:
    return goal_progress(world, goal) >= 1.0


def goal_progress(world: World, goal: Goal) -> float:
    """Share of the goal's subgoals that hold now (1.0 = goal met).

    place: [hold an O, O in R]; treated: [hold an O, a treated O, treated O in R];
    two: [hold an O, one O in an R, two in the same R]; look: [hold an O, ... under a lit lamp].
    """
    blueprint = world.blueprint
    objects = blueprint.by_type.get(goal.obj_type, ())
    holding = [a for a in world.agents.values() if a.holding in objects]
    if goal.task_type == LOOK:
        for a in holding:  # a lit lamp of the goal's type in a receptacle at the agent's spot
            if any(
                world.obj_type_of(x) == goal.rec_type and x in world.lit
                for r in world.at_hand(a.name)
                for x in world.contents[r]
            ):
                return 1.0
        return 0.5 if holding else 0.0
    held = 1.0 if holding else 0.0
    rec_type = blueprint.rec_type
    if goal.task_type == TWO:
        best = 0
        per_rec: dict[str, int] = {}
        for o in objects:
            place = world.where[o]
            if rec_type.get(place) == goal.rec_type:
                per_rec[place] = per_rec.get(place, 0) + 1
                best = max(best, per_rec[place])
        return 1.0 if best >= 2 else 2 / 3 if best == 1 else held / 3
    flag = TREATMENT.get(goal.task_type)
    if flag is None:
        if any(rec_type.get(world.where[o]) == goal.rec_type for o in objects):
            return 1.0
        return held / 2
    treated = getattr(world, flag)
    done = [o for o in objects if o in treated]
    if any(rec_type.get(world.where[o]) == goal.rec_type for o in done):
        return 1.0
    return 2 / 3 if done else held / 3


def choose_goals(task_list: list[str], layouts: list[RoomLayout], rng: random.Random) -> tuple[Goal, ...]:
    goals: list[Goal] = []
    for task_type in task_list:
        options = goal_options(task_type, tuple(layouts), tuple(goals))
        fresh = [g for g in options if all(g.obj_type != old.obj_type for old in goals)]
        options = fresh or options
        if not options:  # task_ids only names feasible ones; keep the error readable
            raise RuntimeError(f"no feasible {task_type} goal in {[lay.room_type for lay in layouts]}")
        goals.append(rng.choice(options))
    return tuple(goals)


@lru_cache(maxsize=4096)  # one entry per (task, layouts, earlier goals): shared by many blueprints
def goal_options(task_type: str, layouts: tuple[RoomLayout, ...], earlier: tuple[Goal, ...]) -> tuple[Goal, ...]:
    """Every feasible goal of a task type; a goal repeating an earlier goal's object type must
    name another receptacle type (so it is not met by the earlier one, and both can start)."""
    rec_types = sorted({t for lay in layouts for t, _ in lay.receptacles})
    taken = {(g.obj_type, g.rec_type) for g in earlier}
    blocked: dict[str, set[str]] = {}
    for g in earlier:
        if g.task_type != "look_at_obj_in_light":
            blocked.setdefault(g.obj_type, set()).add(g.rec_type)
    options = []
    for lay in layouts:
        room_types = {t for t, _ in lay.receptacles}
        for otype in lay.object_types:
            if task_type == "look_at_obj_in_light":
                options += [Goal(task_type, otype, lamp) for lamp in lay.lamps if (otype, lamp) not in taken]
                continue
            capable, appliances = _processing(task_type)
            if capable is not None and (otype not in capable or not appliances & set(rec_types)):
                continue
            for rtype in rec_types:
                if otype not in data.ACCEPTS[rtype] or rtype in appliances or (otype, rtype) in taken:
                    continue
                if rtype in {g.rec_type for g in earlier if g.obj_type == otype}:
                    continue
                # the objects need a spot to start from in their own room, outside every goal
                # receptacle type of theirs
                avoid = blocked.get(otype, set()) | {rtype}
                if any(otype in data.ACCEPTS[t] and t not in avoid for t in room_types):
                    options.append(Goal(task_type, otype, rtype))
    return tuple(sorted(set(options)))


def _processing(task_type: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(object types that can take the treatment, appliance types) of a task type."""
    return {
        "pick_heat_then_place": (data.HEATABLE, data.HEATERS),
        "pick_cool_then_place": (data.COOLABLE, data.COOLERS),
        "pick_clean_then_place": (data.CLEANABLE, data.CLEANERS),
    }.get(task_type, (None, frozenset()))
