"""How a household command is read before the engine runs it: strictly as ALFWorld 0.4.2 does,
with the ReAct-era ``put O in/on R`` too (``legacy_command``), or forgiving case, punctuation,
articles and phrasing (``lenient_command``); and which commands a state admits
(``admissible_commands``, which the engine caches)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from turngym.envs.household import data

if TYPE_CHECKING:
    from turngym.envs.household.engine import World

_PUT = re.compile(r"^(?:put|place|move) (.+?) (?:in/on|into|onto|in|on|to) (.+)$")
_ARTICLES = re.compile(r"\b(?:the|a|an|some)\b ")


def strict_command(text: str) -> str:
    """Strict matching, as ALFWorld 0.4.2: exact text, surrounding spaces ignored."""
    return text.strip()


def legacy_command(text: str) -> str:
    """Strict matching that also takes the ReAct-era ``put O in/on R`` (ALFWorld before 0.4:
    the same command as today's ``move O to R``)."""
    command = text.strip()
    if command.startswith("put ") and " in/on " in command:
        obj, _, rec = command[4:].partition(" in/on ")
        return f"move {obj} to {rec}"
    return command


def lenient_command(text: str) -> str:
    """Lenient matching: case, spacing, punctuation, articles and put/move phrasings forgiven."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    s = line.lower().replace("in/on", "\x00")
    s = re.sub(r"[^a-z0-9\x00 ]+", " ", s).replace("\x00", "in/on")
    s = " ".join(s.split())
    s = re.sub(r"^(?:action|command|>)\s*", "", s)
    s = _ARTICLES.sub("", s + " ").strip()
    m = _PUT.match(s)
    if m:
        return f"move {m.group(1)} to {m.group(2)}"
    if s.startswith("goto "):
        s = "go to " + s[5:]
    elif s.startswith("go ") and not s.startswith("go to "):
        s = "go to " + s[3:]
    return s


# verb -> (flag set it adds, flag set it removes, appliance types, the blueprint's capable objects)
TREAT = {
    "heat": ("hot", "cool", data.HEATERS, "heatable"),
    "cool": ("cool", "hot", data.COOLERS, "coolable"),
    "clean": ("clean", None, data.CLEANERS, "cleanable"),
}


def admissible_commands(world: World, spot: str | None, recs: tuple[str, ...], held: str | None) -> list[str]:
    """The sorted commands open to an agent at ``spot`` (``recs`` its receptacles) holding ``held``."""
    blueprint = world.blueprint
    out = [*blueprint.goto[spot], "help", "inventory", "look"]
    held_type = blueprint.obj_type[held] if held is not None else None
    knife = held_type in data.KNIVES
    if held is not None:
        out.append(f"examine {held}")
    for rec in recs:
        out.append(f"examine {rec}")
        if rec in blueprint.openable:
            out.append(f"close {rec}" if rec in world.opened else f"open {rec}")
        open_now = world.accessible(rec)
        for obj in world.contents[rec]:
            if obj in blueprint.toggleable:
                out.append(f"use {obj}")
            if open_now and held is None and obj in blueprint.pickupable:
                out.append(f"take {obj} from {rec}")
            if knife and obj in blueprint.sliceable and world.spots_of is None:
                out.append(f"slice {obj} with {held}")  # closed or not: ALFWorld checks the spot only
        if held is None:
            continue
        if open_now and held_type in blueprint.can_contain.get(blueprint.rec_type[rec], ()):
            out.append(f"move {held} to {rec}")
        for verb, (_, _, appliances, capable) in TREAT.items():
            if blueprint.rec_type[rec] in appliances and held in getattr(blueprint, capable):
                out.append(f"{verb} {held} with {rec}")
    if knife and world.spots_of is not None:  # a game file's objects: where they are located
        out += [
            f"slice {o} with {held}" for o in world.located_here(recs[0] if recs else None) if o in blueprint.sliceable
        ]
    # no duplicates to drop: each command names a distinct thing (an object lies in one
    # receptacle); the "go to" list and help/inventory/look form one sorted run already,
    # so the sort merges in the few local commands
    return sorted(out)
