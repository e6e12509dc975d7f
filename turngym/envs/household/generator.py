"""Seeded, lazy generation of layouts, games and task ids.

Nothing is stored on disk: a task id names everything needed to rebuild its game,

    <kind>/<split>/<world>/<tasks>/<n>      e.g.  room/train/kitchen-07/pick_heat_then_place/0012

``kind`` is ``room`` (one room), ``easy`` (a small room, pick-and-place only), ``house`` (four rooms,
world ``house-K-L-B-T`` names one layout per room type) or ``seq`` (two tasks joined by ``+``).
The game is drawn from ``random.Random(task_id)`` (string seeds hash with SHA-512, so the game is
the same on every machine and process). Layouts are numbered per room type; layouts
``UNSEEN_LAYOUTS`` never appear in ``train`` or ``valid_seen``, so a layout's split depends on its
number only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache, lru_cache

from turngym.envs.household import data
from turngym.envs.household.tasks import Goal, goal_text

LAYOUTS_PER_ROOM = 40
SEEN_LAYOUTS = tuple(range(34))
UNSEEN_LAYOUTS = tuple(range(34, LAYOUTS_PER_ROOM))
SPLIT_SIZES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
SPLITS = tuple(SPLIT_SIZES)
KINDS = ("room", "easy", "house", "seq")
EASY_RECEPTACLES = 4
MIN_DISTRACTOR_TYPES = 4
GAME_CACHE_SIZE = 4096  # built games kept (~13 kB each; all train games of a kind fit)


@dataclass(frozen=True)
class RoomLayout:
    room_type: str
    index: int
    receptacles: tuple[tuple[str, int], ...]  # (type, count), in a fixed order
    object_types: tuple[str, ...]  # object types that may appear (each fits some receptacle here)
    lamp_holder: str | None  # receptacle type whose first instance holds a desklamp


@dataclass
class Game:
    """A game's static part. ``World`` (engine.py) holds the mutable state built from it."""

    task_id: str
    kind: str
    rooms: tuple[str, ...]  # room types, in order
    receptacles: tuple[str, ...]  # names in display order
    rec_type: dict[str, str]
    rec_room: dict[str, str]
    obj_type: dict[str, str]  # every object (lamps included) -> type; insertion order is canonical
    initial_place: dict[str, str]  # object -> receptacle
    goals: tuple[Goal, ...]
    goal_texts: tuple[str, ...]
    paraphrased_texts: tuple[str, ...]
    order: dict[str, int] = field(default_factory=dict)  # display rank of every name
    by_type: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> objects/receptacles
    goto: dict[str | None, list[str]] = field(default_factory=dict)  # location -> "go to" commands
    initial_contents: dict[str, tuple[str, ...]] = field(default_factory=dict)  # rec -> objects

    def __post_init__(self) -> None:
        names = sorted([*self.receptacles, *self.obj_type], key=_natural)
        self.order = {n: i for i, n in enumerate(names)}
        by_type: dict[str, list[str]] = {}
        for n in names:
            by_type.setdefault(self.rec_type.get(n) or self.obj_type[n], []).append(n)
        self.by_type = {t: tuple(v) for t, v in by_type.items()}
        contents: dict[str, list[str]] = {r: [] for r in self.receptacles}
        for obj, rec in self.initial_place.items():
            contents[rec].append(obj)
        self.initial_contents = {r: tuple(sorted(v, key=self.order.__getitem__))
                                 for r, v in contents.items()}
        every = [f"go to {r}" for r in self.receptacles]
        self.goto = {None: every}
        for r in self.receptacles:
            self.goto[r] = [c for c in every if c != f"go to {r}"]


@lru_cache(maxsize=16384)  # names repeat across games ("cabinet 3"): sort keys are reused
def _natural(name: str) -> tuple[str, int]:
    base, _, num = name.rpartition(" ")
    return (base, int(num)) if num.isdigit() else (name, 0)


# ----- layouts ---------------------------------------------------------------------------------
@cache
def room_layout(room_type: str, index: int) -> RoomLayout:
    if room_type not in data.ROOM_TYPES:
        raise ValueError(f"room_type: unknown {room_type!r}; allowed: {list(data.ROOM_TYPES)}")
    if not 0 <= index < LAYOUTS_PER_ROOM:
        raise ValueError(f"layout index: {index} is outside 0..{LAYOUTS_PER_ROOM - 1}")
    rng = random.Random(f"layout/{room_type}/{index}")
    receptacles = []
    for rtype, (lo, hi) in data.ROOM_RECEPTACLES[room_type].items():
        count = rng.randint(lo, hi)
        if count:
            receptacles.append((rtype, count))
    lamp_holder = None
    if room_type in ("livingroom", "bedroom"):  # the look-at-in-light task needs a lamp
        present = [t for t, _ in receptacles if t in data.LAMP_HOLDERS]
        if not present:
            receptacles.append(("sidetable", 1))
            present = ["sidetable"]
        lamp_holder = rng.choice(present)
    rng.shuffle(receptacles)
    types = {t for t, _ in receptacles}
    fits = [o for o in data.ROOM_OBJECTS[room_type] if any(o in data.ACCEPTS[t] for t in types)]
    keep = max(8, round(len(fits) * rng.uniform(0.55, 0.85)))
    objects = tuple(sorted(rng.sample(fits, min(keep, len(fits)))))
    return RoomLayout(room_type, index, tuple(receptacles), objects, lamp_holder)


# ----- task ids --------------------------------------------------------------------------------
@cache
def task_ids(kind: str, split: str) -> tuple[str, ...]:
    """The stable, ordered task ids of a split (computed, never read from disk)."""
    if kind not in KINDS:
        raise ValueError(f"kind: unknown {kind!r}; allowed: {list(KINDS)}")
    if split not in SPLIT_SIZES:
        raise ValueError(f"split: unknown {split!r}; allowed: {list(SPLITS)}")
    layouts = UNSEEN_LAYOUTS if split == "valid_unseen" else SEEN_LAYOUTS
    rng = random.Random(f"ids/{kind}/{split}")
    ids = []
    for i in range(SPLIT_SIZES[split]):
        if kind == "house":
            world = "house-" + "-".join(f"{rng.choice(layouts):02d}" for _ in data.ROOM_TYPES)
            tasks = data.TASK_TYPES[i % len(data.TASK_TYPES)]
        else:
            room = data.ROOM_TYPES[i % len(data.ROOM_TYPES)]
            world = f"{room}-{rng.choice(layouts):02d}"
            room_tasks = ("pick_and_place_simple",) if kind == "easy" else data.ROOM_TASKS[room]
            tasks = room_tasks[(i // len(data.ROOM_TYPES)) % len(room_tasks)]
            if kind == "seq":
                tasks += "+" + rng.choice(room_tasks)
        ids.append(f"{kind}/{split}/{world}/{tasks}/{i:04d}")
    return tuple(ids)


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
            if room not in data.ROOM_TYPES or not 0 <= idx < LAYOUTS_PER_ROOM:
                raise ValueError
            if (idx in UNSEEN_LAYOUTS) != (split == "valid_unseen"):
                raise ValueError
        allowed = data.TASK_TYPES if kind == "house" else data.ROOM_TASKS[rooms[0][0]]
        if kind == "easy":
            allowed = ("pick_and_place_simple",)
        if any(t not in allowed for t in task_list):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"task_id: {task_id!r} is not a household task id; expected "
            "'<room|easy|house|seq>/<split>/<room>-<layout>/<task type>/<n>', e.g. "
            "'room/train/kitchen-07/pick_heat_then_place/0012' (see env.task_ids(split))") from None
    return kind, split, rooms, task_list


# ----- games -----------------------------------------------------------------------------------
@lru_cache(maxsize=GAME_CACHE_SIZE)
def build_game(task_id: str) -> Game:
    kind, _, rooms, task_list = parse_task_id(task_id)
    rng = random.Random(task_id)
    layouts = [room_layout(room, idx) for room, idx in rooms]
    if kind == "easy":
        layouts = [_easy_layout(layouts[0], rng)]

    # receptacles, numbered per type across the whole world
    counters: dict[str, int] = {}
    rec_type: dict[str, str] = {}
    rec_room: dict[str, str] = {}
    room_recs: dict[str, list[str]] = {}
    for lay in layouts:
        room_recs[lay.room_type] = []
        for rtype, count in lay.receptacles:
            for _ in range(count):
                counters[rtype] = counters.get(rtype, 0) + 1
                name = f"{rtype} {counters[rtype]}"
                rec_type[name] = rtype
                rec_room[name] = lay.room_type
                room_recs[lay.room_type].append(name)

    goals = _choose_goals(task_list, layouts, rec_type, rng)

    # objects: the goal objects first (so they surely exist), then distractors
    excluded: dict[str, set[str]] = {}  # object type -> receptacle types it must not start in
    for g in goals:
        if g.task_type != "look_at_obj_in_light":
            excluded.setdefault(g.obj_type, set()).add(g.rec_type)
    counts: dict[tuple[str, str], int] = {}  # (room, object type) -> count
    for g in goals:
        room = rng.choice([lay.room_type for lay in layouts if _placeable(g.obj_type, lay, room_recs,
                                                                         rec_type, excluded)])
        low = 2 if g.task_type == "pick_two_obj_and_place" else 1
        counts[(room, g.obj_type)] = max(counts.get((room, g.obj_type), 0), rng.randint(low, low + 1))
    goal_types = {g.obj_type for g in goals}
    for lay in layouts:
        pool = [o for o in lay.object_types if o not in goal_types
                and _placeable(o, lay, room_recs, rec_type, excluded)]
        if kind == "easy":
            chosen = rng.sample(pool, min(len(pool), rng.randint(2, 3)))
        else:
            chosen = [o for o in pool if rng.random() < 0.75]
            if len(chosen) < min(MIN_DISTRACTOR_TYPES, len(pool)):  # keep the search non-trivial
                chosen = rng.sample(pool, min(MIN_DISTRACTOR_TYPES, len(pool)))
        for o in chosen:
            counts[(lay.room_type, o)] = rng.choice((1, 1, 1, 2, 2, 3))

    instances: list[tuple[str, str]] = []  # (object type, receptacle)
    for (room, otype), n in counts.items():
        spots = [r for r in room_recs[room] if otype in data.ACCEPTS[rec_type[r]]
                 and rec_type[r] not in excluded.get(otype, ())]
        instances += [(otype, rng.choice(spots)) for _ in range(n)]
    for lay in layouts:
        if lay.lamp_holder and kind != "easy":
            holder = next(r for r in room_recs[lay.room_type] if rec_type[r] == lay.lamp_holder)
            instances.append(("desklamp", holder))
    rng.shuffle(instances)
    numbers: dict[str, int] = {}
    obj_type: dict[str, str] = {}
    initial_place: dict[str, str] = {}
    for otype, rec in instances:
        numbers[otype] = numbers.get(otype, 0) + 1
        name = f"{otype} {numbers[otype]}"
        obj_type[name] = otype
        initial_place[name] = rec
    obj_type = dict(sorted(obj_type.items(), key=lambda kv: _natural(kv[0])))
    initial_place = {o: initial_place[o] for o in obj_type}

    phrasing = [rng.randrange(2) for _ in goals]
    texts = tuple(goal_text(g, p) for g, p in zip(goals, phrasing))
    para_rng = random.Random(f"paraphrase/{task_id}")
    paraphrased = tuple(goal_text(g, p, para_rng) for g, p in zip(goals, phrasing))
    receptacles = tuple(sorted(rec_type, key=lambda r: (rooms_order(layouts, rec_room[r]),
                                                        _natural(r))))
    return Game(task_id=task_id, kind=kind, rooms=tuple(lay.room_type for lay in layouts),
                receptacles=receptacles, rec_type=rec_type, rec_room=rec_room, obj_type=obj_type,
                initial_place=initial_place, goals=goals, goal_texts=texts,
                paraphrased_texts=paraphrased)


def rooms_order(layouts: list[RoomLayout], room: str) -> int:
    return next(i for i, lay in enumerate(layouts) if lay.room_type == room)


def _easy_layout(base: RoomLayout, rng: random.Random) -> RoomLayout:
    """A few always-open receptacles of the base layout, one of each type: everything in sight."""
    types = [t for t, _ in base.receptacles if t not in data.OPENABLE
             and sum(o in data.ACCEPTS[t] for o in base.object_types) >= 2]
    chosen = rng.sample(types, min(EASY_RECEPTACLES, len(types)))
    objects = tuple(o for o in base.object_types
                    if sum(o in data.ACCEPTS[t] for t in chosen) >= 2)
    return RoomLayout(base.room_type, base.index, tuple((t, 1) for t in chosen), objects, None)


def _placeable(otype: str, lay: RoomLayout, room_recs: dict[str, list[str]],
               rec_type: dict[str, str], excluded: dict[str, str]) -> bool:
    return otype in lay.object_types and any(
        otype in data.ACCEPTS[rec_type[r]] and rec_type[r] not in excluded.get(otype, ())
        for r in room_recs[lay.room_type])


def _choose_goals(task_list: list[str], layouts: list[RoomLayout], rec_type: dict[str, str],
                  rng: random.Random) -> tuple[Goal, ...]:
    del rec_type  # the layouts name the same receptacle types
    goals: list[Goal] = []
    for task_type in task_list:
        options = _goal_options(task_type, tuple(layouts), tuple(goals))
        fresh = [g for g in options if all(g.obj_type != old.obj_type for old in goals)]
        options = fresh or options
        if not options:  # cannot happen with the tables in data.py; keep the error readable
            raise RuntimeError(f"no feasible {task_type} goal in {[lay.room_type for lay in layouts]}")
        goals.append(rng.choice(options))
    return tuple(goals)


@lru_cache(maxsize=4096)  # one entry per (task, layouts, earlier goals): shared by many games
def _goal_options(task_type: str, layouts: tuple[RoomLayout, ...],
                  earlier: tuple[Goal, ...]) -> tuple[Goal, ...]:
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
                if lay.lamp_holder and (otype, "desklamp") not in taken:
                    options.append(Goal(task_type, otype, "desklamp"))
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
