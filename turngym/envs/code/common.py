"""What the code envs share: fenced code. Their actions (a command line or a JSON tool call) are read by
``turngym.tools.parsers.parse_command``."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3|diff|patch|bash|sh)?[ \t]*\n(.*?)```", re.S | re.I)


def code_of(text: str) -> str:
    """The first fenced code block in ``text``, or ``text`` itself when it has none."""
    match = _FENCE.search(text)
    return match.group(1) if match else text.strip("\n")
