"""What the code envs share: reading an action (a command line or a JSON tool call) and fenced code."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3|diff|patch|bash|sh)?[ \t]*\n(.*?)```", re.S | re.I)


@dataclass
class Command:
    name: str
    arguments: dict = field(default_factory=dict)
    #: the text after the command word (first line) and the lines below it
    rest: str = ""


def parse_command(action: str, known: tuple[str, ...]) -> Command | str:
    """A ``Command`` from a JSON tool call (``{"name": ..., "arguments": {...}}``) or from text whose
    first word is a command name; else a one-line error saying what was wrong."""
    text = action.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"the tool call is not valid JSON ({exc.msg} at char {exc.pos})"
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return 'a tool call must be a JSON object {"name": ..., "arguments": {...}}'
        args = obj.get("arguments", {})
        if isinstance(args, str):  # some models send arguments as a JSON string
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return "the tool call's arguments are not a JSON object"
        if not isinstance(args, dict):
            return "the tool call's arguments must be a JSON object"
        if obj["name"] not in known:
            return f"unknown tool {obj['name'][:40]!r}; tools: {', '.join(known)}"
        return Command(obj["name"], args)
    if not text:
        return f"empty action; commands: {', '.join(known)}"
    first, _, rest = text.partition("\n")
    word, _, tail = first.strip().partition(" ")
    word = word.strip().lower()
    if word not in known:
        return f"unknown command {word[:40]!r}; commands: {', '.join(known)}"
    return Command(word, {}, (tail.strip() + "\n" + rest) if rest else tail.strip())


def code_of(text: str) -> str:
    """The first fenced code block in ``text``, or ``text`` itself when it has none."""
    match = _FENCE.search(text)
    return match.group(1) if match else text.strip("\n")
