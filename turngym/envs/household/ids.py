"""ALFWorld-style PDDL ids for a world's names ("cabinet 3" -> "cabinet_bar_000") and the listing order
they fix."""

from __future__ import annotations


def id_order(types: dict[str, str]):
    """Sort key equal to sorting by pddl_ids: (id prefix, rank); every prefix ends in "_bar_"
    and no type holds "_", so no prefix begins another and the tuples sort like the strings."""
    counts: dict[str, int] = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1

    def key(name: str) -> tuple[str, int]:
        t = types[name]
        return _ID_PREFIX.get(t) or _prefix(t), counts[t] - int(name.rpartition(" ")[2])

    return key


_ID_PREFIX: dict[str, str] = {}


def _prefix(t: str) -> str:
    value = _ID_PREFIX[t] = f"{t[:-5]}_bar_" if t.endswith("basin") else f"{t}_bar_"
    return value


def pddl_ids(types: dict[str, str]) -> dict[str, str]:
    """ALFWorld-style PDDL ids for names "<type> <n>" such that ALFWorld's own renaming (sort the
    ids, then hand out numbers per type from the highest down) gives back the same names:
    "cabinet 3" of 3 -> "cabinet_bar_000". Basins keep ALFWorld's shape ("sink_bar_000_bar_sinkbasin")."""
    counts: dict[str, int] = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    ids = {}
    for name, t in types.items():
        rank = counts[t] - int(name.rpartition(" ")[2])
        if t.endswith("basin"):
            ids[name] = f"{t[:-5]}_bar_{rank:03d}_bar_{t}"
        else:
            ids[name] = f"{t}_bar_{rank:03d}"
    return ids
