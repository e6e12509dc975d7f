"""The household rules engine: world state, ALFWorld's rules, admissible commands, observations.

Independent of Gymnasium, and every per-agent datum (location, held object) is keyed by agent
name, so several agents can share one world (the co-op env builds on it):

    blueprint = build_blueprint(task_id)         # generator.py: static, cached per task id
    world = World(blueprint, agents=("alice", "bob")) # fresh mutable state; cheap (no deep copies)
    world.admissible("alice")  -> sorted list[str]  (shared cached list: do not mutate)
    world.at_hand("alice") -> receptacles at the agent's spot;  world.reaches("alice", rec)
    world.is_admissible("alice", command) -> bool
    world.execute("alice", command) -> (observation, valid)   # invalid: "Nothing happens."
    world.intro() / world.overview() / world.look("alice")     # texts
    world.key(*extra) -> str    stable digest of the true state (+ extra, e.g. a goal index)
    world.state_dict() -> dict  the same state, readable;  world.clone() -> World (for planners)
    world.agents[name].location  (the receptacle gone to, or None = middle of the room)
    world.agents[name].holding   (object name or None)
    world.where[obj] -> receptacle name, or "@<agent>" while held
    world.contents[rec] -> objects in/on it, a tuple in display order (replaced, never mutated)
    world.opened, world.hot, world.cool, world.clean, world.sliced, world.lit -> sets of names
    (read these freely; change the state only through execute(), which keeps key() in step)
    blueprint.goals -> tuple of tasks.Goal;  tasks.goal_progress(world, goal) -> 0..1 (any agent counts)
    expert.expert_action(world, agent, goal) -> next command for that agent (plans from now)

Admissible lists are cached per process, keyed by the blueprint and everything they depend on
(location, held object, open or not, what is there), so repeated states, across resets and envs
of the same blueprint, cost one dict lookup.
"""

from __future__ import annotations

import hashlib
from bisect import bisect

from turngym.envs.household import data
from turngym.envs.household.commands import TREAT, admissible_commands
from turngym.envs.household.generator import Blueprint
from turngym.envs.household.wording import HELP, joined_names, listing

NOTHING = "Nothing happens."
READ_ONLY = ("look", "inventory", "examine ", "help")  # commands that never change the state
_FLAG_VERBS = frozenset({"open", "close", "heat", "cool", "clean", "use", "slice"})
NOT_ADMISSIBLE = "not an admissible command"
# (task id, what the commands depend on) -> sorted commands; shared by every world in the
# process, emptied when full (~1 kB an entry)
ADMISSIBLE_CACHE_SIZE = 65_536
_admissible_cache: dict[tuple, list[str]] = {}


class Agent:
    __slots__ = ("name", "location", "holding")

    def __init__(self, name: str):
        self.name = name
        self.location: str | None = None  # the receptacle last gone to (None: middle of the room)
        self.holding: str | None = None


class World:
    """Mutable state of one world built from a ``Blueprint``; every rule of the household lives in this class.

    The rules are ALFWorld 0.4.2's (alfred.pddl as TextWorld's PDDL engine applies them): the
    agent stands at a spot, and every receptacle of that spot is within reach (two stacked
    drawers share one); ``examine`` works on the held object and the receptacles at hand;
    ``use`` turns a lamp on for good; slicing needs a knife in hand and may be repeated."""

    def __init__(self, blueprint: Blueprint, agents: tuple[str, ...] | list[str] = ("agent",)):
        if not agents or len(set(agents)) != len(agents):
            raise ValueError(f"agents: need one or more distinct names, got {list(agents)}")
        self.blueprint = blueprint
        self.agents = {name: Agent(name) for name in agents}
        self.where: dict[str, str] = dict(blueprint.initial_place)  # key order fixed by the blueprint
        # tuples, replaced on take/move: a new world copies one dict, not a list per receptacle
        self.contents: dict[str, tuple[str, ...]] = dict(blueprint.initial_contents)
        flags = blueprint.initial_flags
        self.opened: set[str] = set(flags.get("opened", ()))
        self.hot: set[str] = set(flags.get("hot", ()))
        self.cool: set[str] = set(flags.get("cool", ()))
        self.clean: set[str] = set(flags.get("clean", ()))
        self.sliced: set[str] = set(flags.get("sliced", ()))
        self.lit: set[str] = set(flags.get("lit", ()))
        self._flags_text: str | None = None  # key() part for the flag sets; reset when they change
        self._where_text: str | None = None  # key() part for where things are; reset on take/move
        self._agents_text: str | None = None  # key() part for spots and hands; reset on go/take/move
        self._last_admissible: tuple = (None, -1, None)  # (agent, version, list): asked twice a step
        # ALFWorld remembers where a thing was taken from until it goes back there (its
        # not_inreceptacle facts); an object back on a spot it was taken from, in a neighbour
        # receptacle, shows as "Next to it, you see ..." in look. obj -> receptacles
        self.taken_from: dict[str, set[str]] = {}
        self.next_to: set[str] = set()  # the objects look shows so (part of the state)
        # where each object is on the floor plan, for game files that place objects away from
        # their receptacle (ALFWorld's objectAtLocation: slicing and look go by it); else None
        self.spots_of: dict[str, set[str]] | None = (
            {o: set(v) for o, v in blueprint.object_spots.items()} if blueprint.object_spots else None
        )
        self._version = 0  # bumped by every command that may change the state

    def clone(self) -> World:
        """An independent copy (shallow per container: names are immutable strings)."""
        other = object.__new__(World)
        other.blueprint = self.blueprint
        other.agents = {}
        for name, a in self.agents.items():
            b = other.agents[name] = Agent(name)
            b.location, b.holding = a.location, a.holding
        other.where = dict(self.where)
        other.contents = dict(self.contents)
        for flag in ("opened", "hot", "cool", "clean", "sliced", "lit"):
            setattr(other, flag, set(getattr(self, flag)))
        other._flags_text = self._flags_text
        other._where_text = self._where_text
        other._agents_text = self._agents_text
        other._last_admissible = (None, -1, None)
        other._version = 0
        other.taken_from = {o: set(v) for o, v in self.taken_from.items()}
        other.next_to = set(self.next_to)
        other.spots_of = None if self.spots_of is None else {o: set(v) for o, v in self.spots_of.items()}
        return other

    # ----- queries ------------------------------------------------------------------------------
    def obj_type_of(self, name: str) -> str:
        return self.blueprint.obj_type.get(name) or self.blueprint.rec_type[name]

    def accessible(self, rec: str) -> bool:
        """Can one see into / take from / put into ``rec`` now?"""
        return rec not in self.blueprint.openable or rec in self.opened

    def at_hand(self, agent: str) -> tuple[str, ...]:
        """The receptacles at the agent's spot (none in the middle of the room)."""
        loc = self.agents[agent].location
        return () if loc is None else self.blueprint.spot_recs[self.blueprint.spot[loc]]

    def reaches(self, agent: str, rec: str) -> bool:
        loc = self.agents[agent].location
        return loc is not None and self.blueprint.spot[loc] == self.blueprint.spot[rec]

    def is_admissible(self, agent: str, command: str) -> bool:
        return command in self.admissible(agent)  # a list of ~10-40: a scan beats a set's memory

    def admissible(self, agent: str) -> list[str]:
        """Sorted admissible commands of ``agent`` now (a cached list shared by equal states)."""
        last_agent, version, last = self._last_admissible
        if version == self._version and last_agent == agent:
            return last
        a = self.agents[agent]
        held = a.holding
        blueprint = self.blueprint
        recs = () if a.location is None else blueprint.spot_recs[blueprint.spot[a.location]]  # at_hand, inlined
        opened, contents = self.opened, self.contents
        if len(recs) == 1:  # most spots hold one receptacle: skip the generators
            rec = recs[0]
            key = (self.blueprint.task_id, recs, held, rec in opened, contents[rec])
        else:
            key = (
                self.blueprint.task_id,
                recs,
                held,
                tuple([r in opened for r in recs]),
                tuple([contents[r] for r in recs]),
            )
        if self.spots_of is not None:
            key += (tuple(self.located_here(a.location)),)
        cache = _admissible_cache
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= ADMISSIBLE_CACHE_SIZE:  # bound memory on long runs
                cache.clear()
            spot = None if a.location is None else self.blueprint.spot[a.location]
            hit = cache[key] = admissible_commands(self, spot, recs, held)
        self._last_admissible = (agent, self._version, hit)
        return hit

    # ----- rules ----------------------------------------------------------------------------------
    def execute(self, agent: str, command: str) -> tuple[str, bool]:
        """Apply one command for ``agent``. Not admissible: ``Nothing happens.``, nothing changes."""
        if command not in self.admissible(agent):
            return NOTHING, False
        a = self.agents[agent]
        verb, _, rest = command.partition(" ")
        self._version += 1
        if verb == "go":
            target = rest[3:]
            rooms = self.blueprint.rec_room
            prefix = ""
            if len(self.blueprint.rooms) > 1 and (a.location is None or rooms[a.location] != rooms[target]):
                prefix = f"You walk to the {data.ROOM_NAMES[rooms[target]]}. "
            a.location = target
            self._agents_text = None
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
            here = self.contents[rec]
            i = here.index(obj)
            self.contents[rec] = here[:i] + here[i + 1 :]
            self.where[obj] = "@" + agent
            self._where_text = self._agents_text = None
            a.holding = obj
            self.taken_from.setdefault(obj, set()).add(rec)
            if self.spots_of is not None:  # ALFWorld drops the object's place where it stood
                self.spots_of[obj].discard(self.blueprint.spot[rec])
                self._place_next_to(obj)
            elif obj in self.next_to:
                self.next_to.discard(obj)
                self._flags_text = None
            return f"You pick up the {obj} from the {rec}.", True
        if verb == "move":
            obj, _, rec = rest.partition(" to ")
            here = self.contents[rec]
            order = self.blueprint.order
            i = bisect(here, order[obj], key=order.__getitem__)
            self.contents[rec] = (*here[:i], obj, *here[i:])
            self.where[obj] = rec
            self._where_text = self._agents_text = None
            a.holding = None
            before = self.taken_from.get(obj)
            if self.spots_of is not None:
                self.spots_of.setdefault(obj, set()).add(self.blueprint.spot[rec])
                if before:
                    before.discard(rec)
                self._place_next_to(obj)
            elif before:
                before.discard(rec)
                spot = self.blueprint.spot
                if any(spot[r] == spot[rec] for r in before):
                    self.next_to.add(obj)
                    self._flags_text = None
            return f"You move the {obj} to the {rec}.", True
        if verb in TREAT:
            obj, _, appliance = rest.partition(" with ")
            flag, undo, _, _ = TREAT[verb]
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
            return f"You sliced the {obj} with the {knife}.", True
        if verb == "examine":
            if rest in self.blueprint.rec_type:
                return self.describe(rest), True
            return self.describe_object(rest), True
        if verb == "inventory":
            held = a.holding
            return (f"You are carrying: a {held}." if held else "You are not carrying anything."), True
        if verb == "look":
            return self.look(agent), True
        if verb == "help":
            return HELP, True
        raise AssertionError(f"admissible command without a rule: {command!r}")

    # ----- text -------------------------------------------------------------------------------------
    def describe(self, rec: str) -> str:
        if rec in self.blueprint.openable:
            if rec not in self.opened:
                return f"The {rec} is closed."
            return f"The {rec} is open. In it, you see {listing(self.contents[rec])}."
        return f"On the {rec}, you see {listing(self.contents[rec])}."

    def describe_object(self, obj: str) -> str:
        """ALFWorld's examineObject wording, first matching rule wins (alfred.twl2)."""
        if obj in self.blueprint.receptacle_objects:
            return f"This is a normal {obj}. In it, you see {listing(self.blueprint.inner.get(obj, ()))}."
        clean, hot, cool = obj in self.clean, obj in self.hot, obj in self.cool
        sliced = " sliced" if obj in self.sliced else ""
        if clean and (hot or cool):
            return f"This is a {'hot' if hot else 'cool'} and clean{sliced} {obj}."
        if sliced and (clean or hot or cool):
            return f"This is a {'clean' if clean else 'hot' if hot else 'cool'} sliced {obj}."
        if hot or clean:
            return f"This is a {'hot' if hot else 'clean'} {obj}."
        if cool:
            return f"This is a cold {obj}."
        if obj in self.blueprint.toggleable:
            return f"This {obj} is {'on' if obj in self.lit else 'off'}."
        if sliced:
            return f"This is a sliced {obj}."
        return f"There's nothing special about {obj}."

    def intro(self) -> str:
        blueprint = self.blueprint
        text = blueprint.__dict__.get("_intro")  # static per blueprint: made once
        if text is None:
            text = blueprint.__dict__["_intro"] = self._intro()
        return text

    def _intro(self) -> str:
        blueprint = self.blueprint
        if len(blueprint.rooms) == 1:
            return (
                "You are in the middle of a room. Looking quickly around you, you see "
                f"{listing(blueprint.receptacles)}."
            )
        parts = []
        for room in blueprint.rooms:
            recs = [r for r in blueprint.receptacles if blueprint.rec_room[r] == room]
            parts.append(f"In the {data.ROOM_NAMES[room]}, you see {listing(recs)}.")
        rooms = listing([data.ROOM_NAMES[r] for r in blueprint.rooms])
        return f"You are in the middle of a house with {rooms}. " + " ".join(parts)

    def overview(self) -> str:
        """The intro plus what lies on/in every receptacle one can see into without opening it."""
        seen = [self.describe(r) for r in self.blueprint.receptacles if self.accessible(r)]
        return " ".join([self.intro(), *seen])

    def look(self, agent: str) -> str:
        recs = self.at_hand(agent)
        if not recs:  # ALFWorld lists the receptacles at the agent's spot: none in the middle
            return "You are in the middle of a room. Looking quickly around you, you see nothing."
        if self.spots_of is None:
            near = sorted(
                (o for r in recs for o in self.contents[r] if o in self.next_to),
                key=self.blueprint.order.__getitem__,
            )
        else:  # ALFWorld: located here, and taken from a receptacle of this spot
            spot = self.blueprint.spot[recs[0]]
            near = sorted(
                (
                    o
                    for o in self.next_to
                    if spot in self.spots_of[o]
                    and any(self.blueprint.spot[r] == spot for r in self.taken_from.get(o, ()))
                ),
                key=self.blueprint.order.__getitem__,
            )
        return f"You are facing the {joined_names(list(recs))}. Next to it, you see {listing(near)}."

    def located_here(self, rec: str | None) -> list[str]:
        """Objects a game file places at the spot of ``rec`` (ALFWorld's objectAtLocation)."""
        if rec is None:
            return []
        spot = self.blueprint.spot[rec]
        return [o for o in self.blueprint.order if o in self.spots_of and spot in self.spots_of[o]]

    def _place_next_to(self, obj: str) -> None:
        """A game file's object shows as "next to" a spot where it is located and whose
        receptacle it was taken from (and not put back into)."""
        spot = self.blueprint.spot
        shown = any(spot[r] in self.spots_of[obj] for r in self.taken_from.get(obj, ()))
        if shown != (obj in self.next_to):
            (self.next_to.add if shown else self.next_to.discard)(obj)
            self._flags_text = None

    # ----- state ------------------------------------------------------------------------------------
    def signature(self) -> tuple:
        """Everything that defines the state, in a canonical order (the blueprint fixes dict orders)."""
        return (
            self.blueprint.task_id,
            tuple((n, self._spot(a), a.holding) for n, a in sorted(self.agents.items())),
            tuple(self.where.values()),
            tuple(sorted(self.opened)),
            tuple(sorted(self.hot)),
            tuple(sorted(self.cool)),
            tuple(sorted(self.clean)),
            tuple(sorted(self.sliced)),
            tuple(sorted(self.lit)),
            tuple(sorted(self.next_to)),
        )

    def key(self, *extra) -> str:
        """Stable digest of ``signature()`` (plus ``extra``), the same in every process.

        Joins plain strings rather than ``repr`` of the nested tuple: same content, less work
        on the hot path. Names never contain the separators."""
        agents = self._agents_text
        if agents is None:
            agents = self._agents_text = "".join(
                [f"{n};{self._spot(a)};{a.holding};" for n, a in sorted(self.agents.items())]
            )
        flags = self._flags_text
        if flags is None:
            flags = self._flags_text = (
                f"{sorted(self.opened)}{sorted(self.hot)}{sorted(self.cool)}"
                f"{sorted(self.clean)}{sorted(self.sliced)}{sorted(self.lit)}"
                f"{sorted(self.next_to) if self.next_to else ''}"
            )
        where = self._where_text
        if where is None:
            where = self._where_text = ";".join(self.where.values())
        text = f"{self.blueprint.task_id}|{extra}|{agents}|{where}|{flags}"
        if self.spots_of is not None:  # a game file's object places are part of its state
            text += "|" + ";".join(f"{o}@{sorted(s)}" for o, s in sorted(self.spots_of.items()))
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    def _spot(self, a: Agent) -> str | None:
        """Where an agent stands: going to either of two receptacles on one spot is one state."""
        return None if a.location is None else self.blueprint.spot[a.location]

    def state_dict(self) -> dict:
        return {
            "agents": {n: {"location": a.location, "holding": a.holding} for n, a in sorted(self.agents.items())},
            "where": dict(self.where),
            "opened": sorted(self.opened),
            "hot": sorted(self.hot),
            "cool": sorted(self.cool),
            "clean": sorted(self.clean),
            "sliced": sorted(self.sliced),
            "lit": sorted(self.lit),
            "next_to": sorted(self.next_to),
        }
