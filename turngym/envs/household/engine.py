"""The household rules engine: world state, ALFWorld's rules, admissible commands, observations.

Independent of Gymnasium, and every per-agent datum (location, held object) is keyed by agent
name, so several agents can share one world (the co-op env builds on it):

    game  = build_game(task_id)                  # generator.py: static, cached per task id
    world = World(game, agents=("alice", "bob")) # fresh mutable state; cheap (no deep copies)
    world.admissible("alice")  -> sorted list[str]  (shared cached list: do not mutate)
    world.is_admissible("alice", command) -> bool
    world.execute("alice", command) -> (observation, valid)   # invalid: "Nothing happens."
    world.intro() / world.overview() / world.look("alice")     # texts
    world.key(*extra) -> str    stable digest of the true state (+ extra, e.g. a goal index)
    world.state_dict() -> dict  the same state, readable;  world.clone() -> World (for planners)
    world.agents[name].location  (receptacle name or None = middle of the room)
    world.agents[name].holding   (object name or None)
    world.where[obj] -> receptacle name, or "@<agent>" while held
    world.contents[rec] -> sorted list of objects in/on it
    world.opened, world.hot, world.cool, world.clean, world.sliced, world.lit -> sets of names
    (read these freely; change the state only through execute(), which keeps key() in step)
    game.goals -> tuple of tasks.Goal;  tasks.goal_progress(world, goal) -> 0..1 (any agent counts)
    expert.expert_action(world, agent, goal) -> next command for that agent (plans from now)

Admissible lists are cached per process, keyed by the game and everything they depend on
(location, held object, open or not, what is there), so repeated states, across resets and envs
of the same game, cost one dict lookup.
"""

from __future__ import annotations

import hashlib
import re
from bisect import insort

from turngym.envs.household import data
from turngym.envs.household.generator import Game

NOTHING = "Nothing happens."
READ_ONLY = ("look", "inventory", "examine ")  # commands that never change the state
_FLAG_VERBS = frozenset({"open", "close", "heat", "cool", "clean", "use", "slice"})
NOT_ADMISSIBLE = "not an admissible command"
# (task id, what the commands depend on) -> sorted commands; shared by every world in the
# process, emptied when full (~1 kB an entry)
ADMISSIBLE_CACHE_SIZE = 65_536
_admissible_cache: dict[tuple, list[str]] = {}
_TREAT = {"heat": ("hot", "cool", data.HEATERS, data.HEATABLE),
          "cool": ("cool", "hot", data.COOLERS, data.COOLABLE),
          "clean": ("clean", None, data.CLEANERS, data.CLEANABLE)}


class Agent:
    __slots__ = ("name", "location", "holding")

    def __init__(self, name: str):
        self.name = name
        self.location: str | None = None
        self.holding: str | None = None


class World:
    """Mutable state of one game; every rule of the household lives in this class."""

    def __init__(self, game: Game, agents: tuple[str, ...] | list[str] = ("agent",)):
        if not agents or len(set(agents)) != len(agents):
            raise ValueError(f"agents: need one or more distinct names, got {list(agents)}")
        self.game = game
        self.agents = {name: Agent(name) for name in agents}
        self.where: dict[str, str] = dict(game.initial_place)  # key order fixed by the game
        self.contents: dict[str, list[str]] = {r: list(v) for r, v in game.initial_contents.items()}
        self.opened: set[str] = set()
        self.hot: set[str] = set()
        self.cool: set[str] = set()
        self.clean: set[str] = set()
        self.sliced: set[str] = set()
        self.lit: set[str] = set()
        self._flags_text: str | None = None  # key() part for the flag sets; reset when they change

    def clone(self) -> World:
        """An independent copy (shallow per container: names are immutable strings)."""
        other = object.__new__(World)
        other.game = self.game
        other.agents = {}
        for name, a in self.agents.items():
            b = other.agents[name] = Agent(name)
            b.location, b.holding = a.location, a.holding
        other.where = dict(self.where)
        other.contents = {r: list(v) for r, v in self.contents.items()}
        for flag in ("opened", "hot", "cool", "clean", "sliced", "lit"):
            setattr(other, flag, set(getattr(self, flag)))
        other._flags_text = self._flags_text
        return other

    # ----- queries ------------------------------------------------------------------------------
    def obj_type_of(self, name: str) -> str:
        return self.game.obj_type.get(name) or self.game.rec_type[name]

    def accessible(self, rec: str) -> bool:
        """Can one see into / take from / put into ``rec`` now?"""
        return self.game.rec_type[rec] not in data.OPENABLE or rec in self.opened

    def is_admissible(self, agent: str, command: str) -> bool:
        return command in self.admissible(agent)  # a list of ~10-40: a scan beats a set's memory

    def admissible(self, agent: str) -> list[str]:
        """Sorted admissible commands of ``agent`` now (a cached list shared by equal states)."""
        a = self.agents[agent]
        loc, held = a.location, a.holding
        here = tuple(self.contents[loc]) if loc is not None else ()
        knife = held is not None and self.game.obj_type[held] in data.KNIVES
        key = (self.game.task_id, loc, held, loc in self.opened, here,
               tuple(o for o in here if o in self.sliced) if knife else ())
        cache = _admissible_cache
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= ADMISSIBLE_CACHE_SIZE:  # bound memory on long runs
                cache.clear()
            hit = cache[key] = self._commands(loc, held, here)
        return hit

    def _commands(self, loc: str | None, held: str | None, here: tuple[str, ...]) -> list[str]:
        game = self.game
        out = [*game.goto[loc], "inventory", "look"]
        held_type = game.obj_type[held] if held is not None else None
        if held is not None:
            out.append(f"examine {held}")
        if loc is not None:
            rtype = game.rec_type[loc]
            out.append(f"examine {loc}")
            if rtype in data.OPENABLE:
                out.append(f"close {loc}" if loc in self.opened else f"open {loc}")
            if self.accessible(loc):
                for obj in here:
                    otype = game.obj_type[obj]
                    if otype in data.LAMPS:
                        out.append(f"use {obj}")
                    elif held is None:
                        out.append(f"take {obj} from {loc}")
                    elif (held_type in data.KNIVES and otype in data.SLICEABLE
                          and obj not in self.sliced):
                        out.append(f"slice {obj} with {held}")
                if held is not None and held_type in data.ACCEPTS[rtype]:
                    out.append(f"move {held} to {loc}")
            if held is not None:
                for verb, (_, _, appliances, capable) in _TREAT.items():
                    if rtype in appliances and held_type in capable:
                        out.append(f"{verb} {held} with {loc}")
        out = sorted(set(out))
        return out

    # ----- rules ----------------------------------------------------------------------------------
    def execute(self, agent: str, command: str) -> tuple[str, bool]:
        """Apply one command for ``agent``. Not admissible: ``Nothing happens.``, nothing changes."""
        if not self.is_admissible(agent, command):
            return NOTHING, False
        a = self.agents[agent]
        verb, _, rest = command.partition(" ")
        if verb == "go":
            target = rest[3:]
            rooms = self.game.rec_room
            prefix = ""
            if len(self.game.rooms) > 1 and (a.location is None or rooms[a.location] != rooms[target]):
                prefix = f"You walk to the {data.ROOM_NAMES[rooms[target]]}. "
            a.location = target
            return f"{prefix}You arrive at {target}. {self.describe(target)}", True
        if verb in _FLAG_VERBS:
            self._flags_text = None
        if verb == "open":
            self.opened.add(rest)
            return f"You open the {rest}. {self.describe(rest)}", True
        if verb == "close":
            self.opened.discard(rest)
            return f"You close the {rest}.", True
        if verb == "take":
            obj, _, rec = rest.partition(" from ")
            self.contents[rec].remove(obj)
            self.where[obj] = "@" + agent
            a.holding = obj
            return f"You pick up the {obj} from the {rec}.", True
        if verb == "move":
            obj, _, rec = rest.partition(" to ")
            insort(self.contents[rec], obj, key=self.game.order.__getitem__)
            self.where[obj] = rec
            a.holding = None
            return f"You move the {obj} to the {rec}.", True
        if verb in _TREAT:
            obj, _, appliance = rest.partition(" with ")
            flag, undo, _, _ = _TREAT[verb]
            getattr(self, flag).add(obj)
            if undo:  # heating a cold thing makes it hot, not both
                getattr(self, undo).discard(obj)
            return f"You {verb} the {obj} using the {appliance}.", True
        if verb == "use":
            self.lit.add(rest)
            return f"You turn on the {rest}.", True
        if verb == "slice":
            obj, _, knife = rest.partition(" with ")
            self.sliced.add(obj)
            return f"You slice the {obj} with the {knife}.", True
        if verb == "examine":
            if rest in self.game.rec_type:
                return self.describe(rest), True
            return self.describe_object(rest), True
        if verb == "inventory":
            held = a.holding
            return (f"You are carrying: a {held}." if held else "You are not carrying anything."), True
        if verb == "look":
            return self.look(agent), True
        raise AssertionError(f"admissible command without a rule: {command!r}")

    # ----- text -------------------------------------------------------------------------------------
    def describe(self, rec: str) -> str:
        if self.game.rec_type[rec] in data.OPENABLE:
            if rec not in self.opened:
                return f"The {rec} is closed."
            return f"The {rec} is open. In it, you see {_listing(self.contents[rec])}."
        return f"On the {rec}, you see {_listing(self.contents[rec])}."

    def describe_object(self, obj: str) -> str:
        flags = [f for f, s in (("hot", self.hot), ("cool", self.cool), ("clean", self.clean),
                                ("sliced", self.sliced), ("on", self.lit)) if obj in s]
        if not flags:
            return f"There's nothing special about {obj}."
        return f"This is a {', '.join(flags)} {obj}." if "on" not in flags else f"The {obj} is on."

    def intro(self) -> str:
        game = self.game
        if len(game.rooms) == 1:
            return ("You are in the middle of a room. Looking quickly around you, you see "
                    f"{_listing(list(game.receptacles))}.")
        parts = []
        for room in game.rooms:
            recs = [r for r in game.receptacles if game.rec_room[r] == room]
            parts.append(f"In the {data.ROOM_NAMES[room]}, you see {_listing(recs)}.")
        rooms = _listing([data.ROOM_NAMES[r] for r in game.rooms])
        return f"You are in the middle of a house with {rooms}. " + " ".join(parts)

    def overview(self) -> str:
        """The intro plus what lies on/in every receptacle one can see into without opening it."""
        seen = [self.describe(r) for r in self.game.receptacles if self.accessible(r)]
        return " ".join([self.intro(), *seen])

    def look(self, agent: str) -> str:
        loc = self.agents[agent].location
        if loc is None:
            return self.intro()
        return f"You are facing the {loc}. Next to it, you see nothing."

    # ----- state ------------------------------------------------------------------------------------
    def signature(self) -> tuple:
        """Everything that defines the state, in a canonical order (the game fixes dict orders)."""
        return (self.game.task_id,
                tuple((n, a.location, a.holding) for n, a in sorted(self.agents.items())),
                tuple(self.where.values()),
                tuple(sorted(self.opened)), tuple(sorted(self.hot)), tuple(sorted(self.cool)),
                tuple(sorted(self.clean)), tuple(sorted(self.sliced)), tuple(sorted(self.lit)))

    def key(self, *extra) -> str:
        """Stable digest of ``signature()`` (plus ``extra``), the same in every process.

        Joins plain strings rather than ``repr`` of the nested tuple: same content, less work
        on the hot path. Names never contain the separators."""
        agents = "".join([f"{n};{a.location};{a.holding};" for n, a in sorted(self.agents.items())])
        flags = self._flags_text
        if flags is None:
            flags = self._flags_text = (f"{sorted(self.opened)}{sorted(self.hot)}{sorted(self.cool)}"
                                        f"{sorted(self.clean)}{sorted(self.sliced)}{sorted(self.lit)}")
        text = f"{self.game.task_id}|{extra}|{agents}|{';'.join(self.where.values())}|{flags}"
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    def state_dict(self) -> dict:
        return {"agents": {n: {"location": a.location, "holding": a.holding}
                           for n, a in sorted(self.agents.items())},
                "where": dict(self.where), "opened": sorted(self.opened), "hot": sorted(self.hot),
                "cool": sorted(self.cool), "clean": sorted(self.clean),
                "sliced": sorted(self.sliced), "lit": sorted(self.lit)}


def _listing(names: list[str]) -> str:
    if not names:
        return "nothing"
    items = [f"a {n}" for n in names]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


# ----- parsing -------------------------------------------------------------------------------------
_PUT = re.compile(r"^(?:put|place|move) (.+?) (?:in/on|into|onto|in|on|to) (.+)$")
_ARTICLES = re.compile(r"\b(?:the|a|an|some)\b ")


def strict_command(text: str) -> str:
    """Strict matching: exact text, surrounding spaces ignored; the older ALFWorld phrasing
    ``put O in/on R`` is the same command as ``move O to R``."""
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
