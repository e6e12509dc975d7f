"""ALFWorld's fixed wording: the game header, the help text, and how lists of names are written."""

from __future__ import annotations

HEADER = "-= Welcome to TextWorld, ALFRED! =-"


# ALFWorld's help text (alfred.twl2), word for word (its leading newline does not show)
HELP = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)


def listing(names: list[str] | tuple[str, ...]) -> str:
    """ALFWorld's lists: always "a" (even "a apple 1"), ", and " before the last, even of two."""
    if not names:
        return "nothing"
    if len(names) == 1:
        return f"a {names[0]}"
    return "a " + ", a ".join(names[:-1]) + ", and a " + names[-1]


def joined_names(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]
