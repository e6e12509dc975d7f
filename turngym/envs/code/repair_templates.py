"""The function templates, package and module names CodeRepair-v0's tasks are drawn
from (task data, hidden from the agent like the generator in repair_tasks.py)."""

from __future__ import annotations

from dataclasses import dataclass

PACKAGES = (
    "shoplib",
    "ledger",
    "toolbox",
    "metrics",
    "planner",
    "warehouse",
    "gradebook",
    "textkit",
    "citytools",
    "farmstats",
)


MODULES = (
    "pricing",
    "inventory",
    "reports",
    "calendar_utils",
    "scoring",
    "geometry",
    "parsing",
    "stats",
    "billing",
    "helpers",
    "ranges",
    "records",
    "schedule",
    "text_ops",
    "limits",
    "orders",
)


@dataclass(frozen=True)
class FunctionTemplate:
    key: str
    names: dict[str, tuple[str, ...]]  # placeholder -> candidate function names
    source: str  # string.Template text: $f, $g for names, other $params for constants
    bugs: tuple[tuple[str, str, str], ...]  # (kind, correct text, buggy text); texts are templates too
    cases: tuple[tuple[str, str], ...]  # (name placeholder, argument list text)
    params: tuple[tuple[str, tuple], ...] = ()  # constant -> candidate values


T = FunctionTemplate


TEMPLATES: tuple[FunctionTemplate, ...] = (
    T(
        "clamp",
        {"f": ("clamp", "bound_value", "limit_to_range")},
        '''def $f(value, low, high):
    """Return value limited to the range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
''',
        (
            ("wrong operator", "if value < low:", "if value > low:"),
            ("swapped arguments", "return high\n", "return low\n"),
        ),
        (("f", "(5, 0, 10)"), ("f", "(-3, 0, 10)"), ("f", "(12, 0, 10)"), ("f", "(0, 0, 0)")),
    ),
    T(
        "window_sum",
        {"f": ("window_sum", "sum_slice", "run_total")},
        '''def $f(values, start, count):
    """Sum of count consecutive values beginning at index start."""
    total = 0
    for i in range(start, start + count):
        total += values[i]
    return total
''',
        (
            ("off-by-one", "range(start, start + count)", "range(start, start + count - 1)"),
            ("off-by-one", "range(start, start + count)", "range(start + 1, start + count + 1)"),
        ),
        (("f", "([1, 2, 3, 4, 5], 1, 3)"), ("f", "([7, 7], 0, 0)"), ("f", "([4, 9, 16], 0, 2)")),
    ),
    T(
        "count_above",
        {"f": ("count_above", "num_over", "tally_high")},
        '''def $f(values, threshold=$c):
    """How many values are strictly greater than threshold."""
    return sum(1 for v in values if v > threshold)
''',
        (
            ("wrong operator", "if v > threshold", "if v >= threshold"),
            ("wrong default", "threshold=$c", "threshold=$c1"),
        ),
        (("f", "([1, 5, 9], 4)"), ("f", "([$c, $c1, 0])"), ("f", "([2, 2, 3], 2)"), ("f", "([])")),
        (("c", (0, 3, 10, 50)),),
    ),
    T(
        "safe_ratio",
        {"f": ("safe_ratio", "divide_or_default", "ratio")},
        '''def $f(numerator, denominator, default=0.0):
    """The quotient rounded to 3 places, or default when denominator is 0."""
    if denominator == 0:
        return default
    return round(numerator / denominator, 3)
''',
        (
            ("missing case", "    if denominator == 0:\n        return default\n", ""),
            ("wrong operator", "numerator / denominator", "numerator // denominator"),
            ("wrong default", "default=0.0", "default=None"),
        ),
        (("f", "(7, 2)"), ("f", "(1, 0)"), ("f", "(9, 3)"), ("f", "(1, 0, -1.0)")),
    ),
    T(
        "discount",
        {"f": ("apply_discount", "discounted", "reduce_price"), "g": ("basket_total", "checkout_sum")},
        '''def $f(price, percent):
    """price reduced by percent (0-100), rounded to cents."""
    return round(price * (100 - percent) / 100, 2)


def $g(prices, percent=$c):
    """Total of the prices after the discount."""
    return round(sum($f(p, percent) for p in prices), 2)
''',
        (
            ("swapped arguments", "$f(p, percent)", "$f(percent, p)"),
            ("wrong default", "percent=$c", "percent=0"),
            ("off-by-one", "(100 - percent)", "(101 - percent)"),
        ),
        (("f", "(80.0, 25)"), ("f", "(10.0, 0)"), ("g", "([10.0, 20.0], 50)"), ("g", "([40.0])")),
        (("c", (10, 15, 20, 30)),),
    ),
    T(
        "fizz",
        {"f": ("fizz_word", "say_number", "game_word")},
        '''def $f(n):
    """The game's word for n."""
    if n % $ab == 0:
        return "$wa$wb"
    if n % $a == 0:
        return "$wa"
    if n % $b == 0:
        return "$wb"
    return str(n)
''',
        (
            ("missing case", '    if n % $ab == 0:\n        return "$wa$wb"\n', ""),
            ("wrong operator", "if n % $a == 0:", "if n % $a != 0:"),
        ),
        (("f", "($a)"), ("f", "($b)"), ("f", "($ab)"), ("f", "(1)"), ("f", "($ab2)")),
        (
            ("pair", ((3, 5), (2, 7), (3, 4), (5, 7))),
            ("words", (("Fizz", "Buzz"), ("Ping", "Pong"), ("Foo", "Bar"))),
        ),
    ),
    T(
        "grade",
        {"f": ("letter_grade", "grade_for", "to_grade")},
        '''def $f(score):
    """Letter for a score out of 100."""
    if score >= $t1:
        return "A"
    if score >= $t2:
        return "B"
    if score >= $t3:
        return "C"
    return "F"
''',
        (
            ("off-by-one", "if score >= $t1:", "if score > $t1:"),
            ("missing case", '    if score >= $t2:\n        return "B"\n', ""),
            ("wrong operator", "if score >= $t3:", "if score <= $t3:"),
        ),
        (("f", "($t1)"), ("f", "($t2)"), ("f", "($t3)"), ("f", "(0)"), ("f", "(100)"), ("f", "($t2m)")),
        (("thresholds", ((90, 80, 70), (85, 70, 55), (93, 85, 75))),),
    ),
    T(
        "last_items",
        {"f": ("last_items", "tail", "newest")},
        '''def $f(items, n):
    """The last n items (all of them when n exceeds the length; none when n <= 0)."""
    if n <= 0:
        return []
    start = max(len(items) - n, 0)
    return items[start:]
''',
        (
            ("off-by-one", "max(len(items) - n, 0)", "max(len(items) - n + 1, 0)"),
            ("missing case", "max(len(items) - n, 0)", "len(items) - n"),
        ),
        (
            ("f", "([1, 2, 3, 4], 2)"),
            ("f", "([1, 2, 3, 4], 5)"),
            ("f", "([1, 2, 3], 0)"),
            ("f", "(['a', 'b', 'c'], 3)"),
        ),
    ),
    T(
        "word_count",
        {"f": ("word_count", "count_fields", "num_tokens")},
        '''def $f(text, sep="$sep"):
    """Number of non-empty fields of text split on sep."""
    parts = [p for p in text.split(sep) if p.strip()]
    return len(parts)
''',
        (
            ("wrong default", 'sep="$sep"', 'sep="$sep2"'),
            ("missing case", "[p for p in text.split(sep) if p.strip()]", "text.split(sep)"),
        ),
        (("f", '("a${sep}b${sep}c")'), ("f", '("a${sep}${sep}b")'), ("f", '("x;y", ";")'), ("f", '("")')),
        (("seps", ((" ", ","), (",", ";"), (";", " "))),),
    ),
    T(
        "range_total",
        {"f": ("range_total", "stepped_sum", "sum_upto")},
        '''def $f(n, step=$s):
    """Sum of 0, step, 2*step, ... up to and including n."""
    return sum(range(0, n + 1, step))
''',
        (
            ("off-by-one", "range(0, n + 1, step)", "range(0, n, step)"),
            ("wrong default", "step=$s", "step=1"),
        ),
        (("f", "(10, 2)"), ("f", "($s6)"), ("f", "(9, 3)"), ("f", "(0)")),
        (("s", (2, 3, 5)),),
    ),
    T(
        "leap",
        {"f": ("is_leap", "leap_year", "has_feb29")},
        '''def $f(year):
    """Gregorian leap year?"""
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0
''',
        (
            ("missing case", "    if year % 400 == 0:\n        return True\n", ""),
            ("wrong operator", "return year % 4 == 0", "return year % 4 != 0"),
        ),
        (("f", "(2000)"), ("f", "(1900)"), ("f", "(2024)"), ("f", "(2023)")),
    ),
    T(
        "merge_counts",
        {"f": ("merge_counts", "add_tallies", "combine_counts")},
        '''def $f(first, second):
    """Counts of both dicts added key by key."""
    merged = dict(first)
    for key, count in second.items():
        merged[key] = merged.get(key, 0) + count
    return merged
''',
        (
            ("wrong operator", "merged.get(key, 0) + count", "merged.get(key, 0) - count"),
            ("wrong default", "merged.get(key, 0)", "merged.get(key, 1)"),
        ),
        (("f", "({'a': 1}, {'a': 2})"), ("f", "({}, {'b': 3})"), ("f", "({'c': 1}, {})")),
    ),
    T(
        "find_index",
        {"f": ("find_index", "position_of", "index_or_missing")},
        '''def $f(items, target, missing=-1):
    """Index of the first item equal to target, or missing."""
    for i, item in enumerate(items):
        if item == target:
            return i
    return missing
''',
        (
            ("wrong default", "missing=-1", "missing=None"),
            ("off-by-one", "            return i\n", "            return i + 1\n"),
        ),
        (("f", "([4, 5, 6], 5)"), ("f", "([4, 5, 6], 9)"), ("f", "([], 1, 0)"), ("f", "([7], 7)")),
    ),
    T(
        "average",
        {"f": ("average", "mean_of", "avg")},
        '''def $f(values):
    """Mean of values rounded to 3 places; 0.0 for no values."""
    if not values:
        return 0.0
    return round(sum(values) / len(values), 3)
''',
        (
            ("missing case", "    if not values:\n        return 0.0\n", ""),
            ("off-by-one", "sum(values) / len(values)", "sum(values) / (len(values) + 1)"),
        ),
        (("f", "([1, 2, 3, 4])"), ("f", "([])"), ("f", "([5])")),
    ),
    T(
        "power_mod",
        {"f": ("power_mod", "modexp", "pow_mod")},
        '''def $f(base, exponent, modulus=$m):
    """base ** exponent % modulus."""
    return pow(base, exponent, modulus)
''',
        (
            ("swapped arguments", "pow(base, exponent, modulus)", "pow(exponent, base, modulus)"),
            ("wrong default", "modulus=$m", "modulus=$m1"),
        ),
        (("f", "(2, 5, 1000)"), ("f", "(7, 5)"), ("f", "(7, 2)"), ("f", "(5, 0, 7)")),
        (("m", (97, 101, 1009)),),
    ),
    T(
        "overlap",
        {"f": ("overlaps", "intervals_meet", "clash")},
        '''def $f(a_start, a_end, b_start, b_end):
    """Do the half-open intervals [a_start, a_end) and [b_start, b_end) overlap?"""
    return a_start < b_end and b_start < a_end
''',
        (
            ("wrong operator", "a_start < b_end and", "a_start <= b_end and"),
            ("swapped arguments", "b_start < a_end", "a_start < b_end"),
        ),
        (("f", "(0, 5, 5, 9)"), ("f", "(0, 5, 4, 9)"), ("f", "(5, 9, 0, 5)"), ("f", "(2, 3, 0, 10)")),
    ),
    T(
        "join_path",
        {"f": ("join_path", "path_join", "child_path")},
        '''def $f(base, name, sep="/"):
    """base and name joined by one sep."""
    return base.rstrip(sep) + sep + name
''',
        (
            ("swapped arguments", "base.rstrip(sep) + sep + name", "name.rstrip(sep) + sep + base"),
            ("wrong default", 'sep="/"', 'sep="."'),
        ),
        (("f", '("data/", "x.txt")'), ("f", '("a", "b", ":")'), ("f", '("root", "leaf")')),
    ),
)
