"""Documented dataclass fields: each one carries its help, its allowed values and its lower bound.

The train config's sections (``turngym/trainers/config.py``) and ``PromptConfig``, which is the
config's ``prompt:`` section, declare their fields with ``doc``; the config checks a run file's
values against this metadata and lists it in ``turngym train --print-config``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any


def doc(help_: str, choices: tuple | None = None, minimum: float | None = None, **kw) -> Any:
    """A dataclass field with its documentation (and optional allowed values / lower bound)."""
    meta = {"help": help_, "choices": choices, "minimum": minimum}
    if "default_factory" in kw:
        return field(default_factory=kw.pop("default_factory"), metadata=meta)
    return field(default=kw.pop("default"), metadata=meta)
