"""Seeded, lazy generation of blueprints and task ids on ALFWorld's 120 real floor plans.

Nothing is stored on disk: a task id names everything needed to rebuild its blueprint,

    <kind>/<split>/<world>/<tasks>/<n>      e.g.  room/train/kitchen-7/pick_heat_then_place/0012

``kind`` is ``room`` (one floor plan), ``easy`` (4 open receptacles of a plan, pick-and-place
only), ``house`` (four plans, world ``house-K-L-B-T`` names one per room type) or ``seq`` (two
tasks joined by ``+``). The world names an AI2-THOR floor plan (kitchens 1-30, living rooms
201-230, bedrooms 301-330, bathrooms 401-430) as ALFWorld's wheel describes it: its receptacle
instances, which of them share a spot, and its object types (data.SCENES). Splits follow ALFRED:
``valid_unseen`` plays its held-out plans (10, 219, 308, 424), ``train`` and ``valid_seen`` the
other training plans, and ``test``, the sealed test split, ALFRED's 24 test plans (1-6,
201-206, 301-306, 401-406: the scenes ALFRED publishes no games for, so no agent has trained on them). Its ids
walk the plans in turn, so any first ``4 * 6 * k`` of them play every test plan ``k`` times, and
each plan meets its room's task types in turn.
Objects are placed the way ALFRED samples them: every pickable type of the plan 1-3 times
(the goal's object up to 4), each in a random receptacle instance whose type can contain it.
The blueprint is drawn from ``random.Random(task_id)`` (string seeds hash with SHA-512, so it is
the same on every machine and process).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache, lru_cache

from turngym.envs.household import data
from turngym.envs.household.ids import id_order, pddl_ids
from turngym.envs.household.tasks import Goal, choose_goals, goal_options, goal_text

SPLIT_SIZES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134, "test": 504}  # test: 21 per test plan
SPLITS = tuple(SPLIT_SIZES)
KINDS = ("room", "easy", "house", "seq")
EASY_RECEPTACLES = 4
BLUEPRINT_CACHE_SIZE = 4096  # built blueprints kept (all train blueprints of a kind fit)


@dataclass(frozen=True)
class RoomLayout:
    room_type: str
    index: int  # the floor plan's number
    receptacles: tuple[tuple[str, int], ...]  # (type, spot), in the plan's order
    object_types: tuple[str, ...]  # pickable types that fit some receptacle of the plan
    lamps: tuple[str, ...]  # lamp types of the plan


@dataclass
class Blueprint:
    """The static part of one household world: floor plan, objects, initial state and goals.
    ``World`` (engine.py) holds the mutable state built from it.

    Only the first fields are required; the rest default to what ALFWorld's tables say (every
    receptacle on a spot of its own, openability and capabilities by type, ALFWorld-style PDDL
    ids). A blueprint read from an ALFWorld game file (alfworld_files.py) sets them all."""

    task_id: str
    kind: str
    rooms: tuple[str, ...]  # room types, in order
    receptacles: tuple[str, ...]  # names
    rec_type: dict[str, str]
    rec_room: dict[str, str]
    obj_type: dict[str, str]  # every object (lamps included) -> type
    initial_place: dict[str, str]  # object -> receptacle
    goals: tuple[Goal, ...]
    goal_texts: tuple[str, ...]
    paraphrased_texts: tuple[str, ...]
    spot: dict[str, str] = field(default_factory=dict)  # receptacle -> where one stands to reach it
    openable: frozenset[str] = None  # receptacle names
    ids: dict[str, str] = field(default_factory=dict)  # name -> PDDL id (fixes every listing order)
    pickupable: frozenset[str] = None  # object names, likewise below
    toggleable: frozenset[str] = None
    heatable: frozenset[str] = None
    coolable: frozenset[str] = None
    cleanable: frozenset[str] = None
    sliceable: frozenset[str] = None
    can_contain: dict[str, frozenset[str]] = None  # receptacle type -> object types
    receptacle_objects: frozenset[str] = frozenset()  # ALFWorld's isReceptacleObject (import only)
    inner: dict[str, tuple[str, ...]] = field(default_factory=dict)  # receptacle object -> what is in it
    # ALFWorld's objectAtLocation where a game file puts an object elsewhere than its receptacle's
    # spot (import only; empty: every object is where its receptacle is)
    object_spots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    initial_flags: dict[str, frozenset[str]] = field(default_factory=dict)  # "opened"/"hot"/... -> names
    goal_formula: object = None  # a PDDL goal read from a game file (alfworld_files.py), else None
    order: dict[str, int] = field(default_factory=dict)  # display rank of every name
    by_type: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> objects/receptacles
    spot_recs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # spot -> receptacles there
    goto: dict[str | None, list[str]] = field(default_factory=dict)  # spot -> "go to" commands
    initial_contents: dict[str, tuple[str, ...]] = field(default_factory=dict)  # rec -> objects

    def __reduce_ex__(self, protocol):
        # a generated blueprint pickles as its task id (rebuilt from the cache on load), so an env
        # snapshot stays small and its world keeps sharing the one cached blueprint; any other
        # (a game file's, or one the cache has since let go) pickles whole
        try:
            cached = build_blueprint(self.task_id) is self
        except ValueError:  # not a generated task id
            cached = False
        return (build_blueprint, (self.task_id,)) if cached else super().__reduce_ex__(protocol)

    def __post_init__(self) -> None:
        types = {**self.rec_type, **self.obj_type}
        if not self.spot:
            self.spot = {r: f"loc {i}" for i, r in enumerate(self.receptacles)}
        if self.openable is None:
            self.openable = frozenset(r for r, t in self.rec_type.items() if t in data.OPENABLE)
        objects = self.obj_type.items()
        for name, table in (
            ("heatable", data.HEATABLE),
            ("coolable", data.COOLABLE),
            ("cleanable", data.CLEANABLE),
            ("sliceable", data.SLICEABLE),
            ("toggleable", data.LAMPS),
        ):
            if getattr(self, name) is None:
                setattr(self, name, frozenset(o for o, t in objects if t in table))
        if self.pickupable is None:
            self.pickupable = frozenset(o for o, t in objects if t not in data.LAMPS)
        if self.can_contain is None:
            self.can_contain = data.ACCEPTS
        # ALFWorld lists things in the order of their ids (see pddl_ids; the same order is
        # computed here without building the ids, which only the exporter needs)
        names = sorted(types, key=self.ids.__getitem__ if self.ids else id_order(types))
        self.order = {n: i for i, n in enumerate(names)}
        self.receptacles = tuple(
            sorted(self.receptacles, key=lambda r: (self.rooms.index(self.rec_room[r]), self.order[r]))
        )
        by_type: dict[str, list[str]] = {}
        for n in names:
            by_type.setdefault(types[n], []).append(n)
        self.by_type = {t: tuple(v) for t, v in by_type.items()}
        spot_recs: dict[str, list[str]] = {}
        for r in self.receptacles:
            spot_recs.setdefault(self.spot[r], []).append(r)
        self.spot_recs = {s: tuple(v) for s, v in spot_recs.items()}
        contents: dict[str, list[str]] = {r: [] for r in self.receptacles}
        for obj, rec in self.initial_place.items():
            contents[rec].append(obj)
        self.initial_contents = {r: tuple(sorted(v, key=self.order.__getitem__)) for r, v in contents.items()}
        self.goto = _GoTo(sorted(f"go to {r}" for r in self.receptacles), self.spot_recs)

    def pddl_ids(self) -> dict[str, str]:
        return self.ids or pddl_ids({**self.rec_type, **self.obj_type})


class _GoTo(dict):
    """spot -> its "go to" commands (none for the receptacles at the spot), made on first use."""

    def __init__(self, every: list[str], spot_recs: dict[str, tuple[str, ...]]):
        super().__init__({None: every})
        self.spot_recs = spot_recs

    def __missing__(self, spot: str) -> list[str]:
        recs = self.spot_recs[spot]
        value = self[spot] = [c for c in self[None] if c[6:] not in recs]
        return value


# ----- layouts ---------------------------------------------------------------------------------
@cache
def scene_numbers(room_type: str, split: str) -> tuple[int, ...]:
    wanted = {"valid_unseen": "unseen", "test": "test"}.get(split, "seen")
    return tuple(n for n, sc in data.SCENES.items() if sc.room == room_type and sc.split == wanted)


@cache
def room_layout(room_type: str, index: int) -> RoomLayout:
    if room_type not in data.ROOM_TYPES:
        raise ValueError(f"room_type: unknown {room_type!r}; allowed: {list(data.ROOM_TYPES)}")
    scene = data.SCENES.get(index)
    if scene is None or scene.room != room_type:
        raise ValueError(f"layout: {room_type} has no floor plan {index}")
    types = {t for t, _ in scene.receptacles}
    objects = tuple(o for o in scene.objects if any(o in data.ACCEPTS[t] for t in types))
    return RoomLayout(room_type, index, scene.receptacles, objects, scene.lamps)


# ----- task ids --------------------------------------------------------------------------------
@cache
def task_ids(kind: str, split: str) -> tuple[str, ...]:
    """The stable, ordered task ids of a split (computed, never read from disk)."""
    if kind not in KINDS:
        raise ValueError(f"kind: unknown {kind!r}; allowed: {list(KINDS)}")
    if split not in SPLIT_SIZES:
        raise ValueError(f"split: unknown {split!r}; allowed: {list(SPLITS)}")
    rng = random.Random(f"ids/{kind}/{split}")
    ids = []
    for i in range(SPLIT_SIZES[split]):
        if kind == "house":
            world = "house-" + "-".join(str(rng.choice(scene_numbers(room, split))) for room in data.ROOM_TYPES)
            tasks = data.TASK_TYPES[i % len(data.TASK_TYPES)]
        else:
            room = data.ROOM_TYPES[i % len(data.ROOM_TYPES)]
            room_tasks = ("pick_and_place_simple",) if kind == "easy" else data.ROOM_TASKS[room]
            if split == "test":
                world, tasks = _test_world(kind, room, room_tasks, i // len(data.ROOM_TYPES), rng)
            else:
                tasks = room_tasks[(i // len(data.ROOM_TYPES)) % len(room_tasks)]
                if kind == "seq":
                    tasks += "+" + rng.choice(room_tasks)
                plans = [n for n in scene_numbers(room, split) if _feasible(room, n, tasks)]
                world = f"{room}-{rng.choice(plans)}"
        ids.append(f"{kind}/{split}/{world}/{tasks}/{i:04d}")
    return tuple(ids)


def _feasible(room: str, plan: int, tasks: str) -> bool:
    """Every task of ``tasks`` ('+'-joined) has a goal that ALFWorld's tables allow on ``plan``."""
    return all(goal_options(t, (room_layout(room, plan),), ()) for t in tasks.split("+"))


def _test_world(kind: str, room: str, room_tasks: tuple[str, ...], j: int, rng: random.Random) -> tuple[str, str]:
    """The ``j``-th test task of ``room``: plan ``j mod 6`` (every plan in turn), its task type the
    next in the room's list each time the plan comes round, skipping types the plan cannot host."""
    plans = scene_numbers(room, "test")
    plan = plans[j % len(plans)]
    start = j // len(plans) + j % len(plans)  # a plan's k-th visit starts k types further on
    for step in range(len(room_tasks)):
        tasks = room_tasks[(start + step) % len(room_tasks)]
        if kind == "seq":
            tasks += "+" + rng.choice([t for t in room_tasks if _feasible(room, plan, t)])
        if _feasible(room, plan, tasks):
            return f"{room}-{plan}", tasks
    raise ValueError(f"split test: floor plan {plan} hosts none of {room}'s task types")


def parse_task_id(task_id: str) -> tuple[str, str, list[tuple[str, int]], list[str]]:
    """-> (kind, split, [(room type, layout index)], [task type, ...]); ValueError if malformed."""
    parts = str(task_id).split("/")
    try:
        kind, split, world, tasks, n = parts
        int(n)
        if kind not in KINDS or split not in SPLIT_SIZES:
            raise ValueError
        if kind == "house":
            label, *nums = world.split("-")
            if label != "house" or len(nums) != len(data.ROOM_TYPES):
                raise ValueError
            rooms = [(r, int(x)) for r, x in zip(data.ROOM_TYPES, nums)]
        else:
            room, num = world.split("-")
            rooms = [(room, int(num))]
        task_list = tasks.split("+")
        if len(task_list) != (2 if kind == "seq" else 1):
            raise ValueError
        for room, idx in rooms:
            if room not in data.ROOM_TYPES or idx not in scene_numbers(room, split):
                raise ValueError
        allowed = data.TASK_TYPES if kind == "house" else data.ROOM_TASKS[rooms[0][0]]
        if kind == "easy":
            allowed = ("pick_and_place_simple",)
        if any(t not in allowed for t in task_list):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"task_id: {task_id!r} is not a household task id; expected "
            "'<room|easy|house|seq>/<split>/<room>-<floor plan>/<task type>/<n>', e.g. "
            "'room/train/kitchen-7/pick_heat_then_place/0012' (see env.task_ids(split))"
        ) from None
    return kind, split, rooms, task_list


# ----- blueprints --------------------------------------------------------------------------------
@lru_cache(maxsize=BLUEPRINT_CACHE_SIZE)
def build_blueprint(task_id: str) -> Blueprint:
    kind, _, rooms, task_list = parse_task_id(task_id)
    rng = random.Random(task_id)
    layouts = [room_layout(room, idx) for room, idx in rooms]
    if kind == "easy":
        layouts = [_easy_layout(layouts[0], rng)]

    rec_type, rec_room, spot, room_recs, fits = _receptacles(tuple(layouts))
    goals = choose_goals(task_list, layouts, rng)

    # the goal's objects never start where the goal wants them (it would be met at once)
    excluded: dict[str, set[str]] = {}  # object type -> receptacle types it must not start in
    for g in goals:
        if g.task_type != "look_at_obj_in_light":
            excluded.setdefault(g.obj_type, set()).add(g.rec_type)

    def spots_for(room: str, otype: str) -> list[str]:
        banned = excluded.get(otype, ())
        return [r for r in fits.get((room, otype), ()) if rec_type[r] not in banned]

    counts: dict[tuple[str, str], int] = {}  # (room, object type) -> count
    for lay in layouts:
        pool = [o for o in lay.object_types if spots_for(lay.room_type, o)]
        if kind == "easy":
            pool = rng.sample(pool, min(len(pool), rng.randint(2, 3)))
        for o in pool:
            counts[(lay.room_type, o)] = rng.randint(1, data.MAX_INSTANCES)
    for g in goals:  # ALFRED: 1..PICKUP_REPEAT_MAX of the target (two for the two-object task)
        room = rng.choice([lay.room_type for lay in layouts if spots_for(lay.room_type, g.obj_type)])
        low = 2 if g.task_type == "pick_two_obj_and_place" else 1
        high = data.PICKUP_REPEAT_MAX if kind != "easy" else low + 1
        counts[(room, g.obj_type)] = max(counts.get((room, g.obj_type), 0), rng.randint(low, high))

    instances: list[tuple[str, str]] = []  # (object type, receptacle)
    for (room, otype), n in counts.items():
        spots = spots_for(room, otype)
        instances += [(otype, rng.choice(spots)) for _ in range(n)]
    if kind != "easy":
        for lay in layouts:
            for lamp in lay.lamps:
                instances.append((lamp, rng.choice(_lamp_holders(room_recs[lay.room_type], rec_type))))
    numbers: dict[str, int] = {}
    obj_type: dict[str, str] = {}
    initial_place: dict[str, str] = {}
    for otype, rec in instances:
        numbers[otype] = numbers.get(otype, 0) + 1
        name = f"{otype} {numbers[otype]}"
        obj_type[name] = otype
        initial_place[name] = rec

    phrasing = [rng.randrange(2) for _ in goals]
    texts = tuple(goal_text(g, p) for g, p in zip(goals, phrasing))
    para_rng = random.Random(f"paraphrase/{task_id}")
    paraphrased = tuple(goal_text(g, p, para_rng) for g, p in zip(goals, phrasing))
    return Blueprint(
        task_id=task_id,
        kind=kind,
        rooms=tuple(lay.room_type for lay in layouts),
        receptacles=tuple(rec_type),
        rec_type=dict(rec_type),
        rec_room=rec_room,
        obj_type=obj_type,
        initial_place=initial_place,
        goals=goals,
        goal_texts=texts,
        paraphrased_texts=paraphrased,
        spot=spot,
    )


@lru_cache(maxsize=1024)  # one per floor plan (or house): shared by all its blueprints
def _receptacles(layouts: tuple[RoomLayout, ...]) -> tuple:
    """Receptacle names (numbered per type across the world, in the plans' order), their types,
    rooms and spots, the names per room, and (room, object type) -> receptacles that take it."""
    counters: dict[str, int] = {}
    rec_type: dict[str, str] = {}
    rec_room: dict[str, str] = {}
    spot: dict[str, str] = {}
    room_recs: dict[str, list[str]] = {}
    fits: dict[tuple[str, str], list[str]] = {}
    for lay in layouts:
        room_recs[lay.room_type] = []
        for rtype, where in lay.receptacles:
            counters[rtype] = counters.get(rtype, 0) + 1
            name = f"{rtype} {counters[rtype]}"
            rec_type[name] = rtype
            rec_room[name] = lay.room_type
            spot[name] = f"{lay.index}/{where}"
            room_recs[lay.room_type].append(name)
            for otype in data.ACCEPTS[rtype]:
                fits.setdefault((lay.room_type, otype), []).append(name)
    return rec_type, rec_room, spot, room_recs, fits


def _lamp_holders(recs: list[str], rec_type: dict[str, str]) -> list[str]:
    """Where a lamp may stand: the first lamp-holder type the room has, else any receptacle that
    needs no opening (ALFWorld's use needs the lamp in a receptacle; the wheel has no positions)."""
    for holder in data.LAMP_HOLDERS:
        found = [r for r in recs if rec_type[r] == holder]
        if found:
            return found
    return [r for r in recs if rec_type[r] not in data.OPENABLE]


def _easy_layout(base: RoomLayout, rng: random.Random) -> RoomLayout:
    """A few always-open receptacles of the base plan, one of each type, each on a spot of its
    own: everything in sight."""
    types = sorted(
        {
            t
            for t, _ in base.receptacles
            if t not in data.OPENABLE and sum(o in data.ACCEPTS[t] for o in base.object_types) >= 2
        }
    )
    chosen = rng.sample(types, min(EASY_RECEPTACLES, len(types)))
    objects = tuple(o for o in base.object_types if sum(o in data.ACCEPTS[t] for t in chosen) >= 2)
    return RoomLayout(base.room_type, base.index, tuple((t, i) for i, t in enumerate(chosen)), objects, ())
