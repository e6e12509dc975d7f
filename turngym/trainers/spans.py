"""Parse the tagged parts of a completion into character spans (Step.spans).

A completion may contain ``<think>...</think>``, ``<switch>KEEP|SWITCH</switch>``,
``<subgoal>...</subgoal>`` and ``<action>...</action>``. Each found tag's *content* becomes a
``name -> [start, end)`` entry (characters of the completion text). Untagged completions get
``{"action": [0, len(text)]}``: the whole text is the action.
"""

from __future__ import annotations

import re

SPAN_NAMES = ("think", "switch", "subgoal", "action")
_TAG = re.compile(r"<(think|switch|subgoal|action)>(.*?)</\1>", re.DOTALL)


def parse_spans(text: str) -> dict[str, list[int]]:
    spans: dict[str, list[int]] = {}
    for m in _TAG.finditer(text):
        spans.setdefault(m.group(1), [m.start(2), m.end(2)])
    if "action" not in spans and not spans:
        spans["action"] = [0, len(text)]
    return spans


def token_span_mask(offsets: list[tuple[int, int]], span: list[int] | None) -> list[int]:
    """1 for tokens whose characters overlap ``span``; ``offsets`` are per-token char ranges."""
    if not span:
        return [0] * len(offsets)
    a, b = span
    return [int(s < b and e > a) for s, e in offsets]
