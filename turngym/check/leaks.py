"""The leak probe: can a program in an env's sandbox read any task's hidden tests or reference
solutions?

``probe_source(needles())`` is a program (standard library only) that walks everything it can
read, apart from its own work dir and the kernel's /proc, /sys and /dev, and reports which
needles (distinctive lines of HumanEval's canonical solutions and tests, of the generator behind
CodeRepair's hidden tests, of the generator behind ToolQA's answers) appear in a file, a
compressed file (gzip, bz2, xz) or a zip member, or as a file name. The needles travel base64
encoded, so the program's own text never matches. ``turngym check`` runs it inside each code
family's sandbox through the env's own tools (``leak_action``); tests/sandbox runs it on every
backend.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
from typing import Any

REPORT = "turngym-leak-probe:"  # the line the probe prints its findings on
#: file names that are task data whatever they contain
NAMES = ("HumanEval.jsonl", "HumanEval.jsonl.gz", "repair_tasks.py", "repair_templates.py")


def _longest_lines(text: str, count: int, minimum: int = 24, containing: str = "") -> list[str]:
    lines = sorted(
        {line.strip() for line in text.splitlines() if len(line.strip()) >= minimum and containing in line},
        key=lambda line: (-len(line), line),
    )
    return lines[:count]


def needles() -> dict[str, str]:
    """label -> a distinctive line of a task's hidden data (HumanEval, CodeRepair, ToolQA)."""
    from turngym.envs.code import repair_tasks, repair_templates
    from turngym.envs.code.humaneval import problems
    from turngym.envs.toolqa import tasks as toolqa_tasks

    out: dict[str, str] = {}
    data = problems()
    for task_id in ("HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/100", "HumanEval/163"):
        problem = data[task_id]
        for i, line in enumerate(_longest_lines(problem["canonical_solution"], 1, 16)):
            out[f"humaneval canonical solution {task_id} #{i}"] = line
        for i, line in enumerate(_longest_lines(problem["test"], 1, containing="candidate(")):
            out[f"humaneval hidden test {task_id} #{i}"] = line
    for i, line in enumerate(_longest_lines(inspect.getsource(repair_tasks) + inspect.getsource(repair_templates), 3)):
        out[f"coderepair generator line #{i}"] = line
    for index in (0, 1):
        for path, source in sorted(repair_tasks.generate(index).test_files.items())[:1]:
            for i, line in enumerate(_longest_lines(source, 1, containing="==")):
                out[f"coderepair hidden test {repair_tasks.task_id(index)} {path} #{i}"] = line
    for i, line in enumerate(_longest_lines(inspect.getsource(toolqa_tasks), 3)):
        out[f"toolqa answer generator line #{i}"] = line
    return out


_PROBE = r"""
import base64, bz2, gzip, json, lzma, os, sys, zipfile, zlib
PART, PARTS = %(part)d, %(parts)d  # this run reads the files whose path hashes to PART
NEEDLES = {k: base64.b64decode(v) for k, v in json.loads(base64.b64decode(%(needles)r)).items()}
NAMES = %(names)r
SKIP = ("/proc", "/sys", "/dev")
CHUNK = 4 << 20
OVERLAP = max(len(n) for n in NEEDLES.values())
hits, stats = [], {"files": 0, "bytes": 0, "unreadable": 0}
work = os.path.realpath(os.getcwd())

def search(stream, where):
    tail = b""
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return
        stats["bytes"] += len(chunk)
        data = tail + chunk
        for label, needle in NEEDLES.items():
            if needle in data:
                hits.append([label, where])
        tail = data[-OVERLAP:]

def scan(path):
    with open(path, "rb") as f:
        head = f.read(4)
        if head == b"\x7fELF":
            return
        f.seek(0)
        search(f, path)
    opener = {b"\x1f\x8b": gzip.open, b"BZ": bz2.open, b"\xfd7": lzma.open}.get(head[:2])
    if opener is not None:
        try:
            with opener(path, "rb") as f:
                search(f, path + " (decompressed)")
        except (OSError, EOFError, ValueError, lzma.LZMAError):
            pass
    if head[:2] == b"PK":
        try:
            with zipfile.ZipFile(path) as z:
                for member in z.namelist():
                    if os.path.basename(member) in NAMES:
                        hits.append(["name " + os.path.basename(member), path + "/" + member])
                    with z.open(member) as f:
                        search(f, path + "/" + member)
        except (OSError, zipfile.BadZipFile, ValueError, NotImplementedError, EOFError):
            pass

for top, dirs, files in os.walk("/", onerror=lambda e: stats.__setitem__("unreadable", stats["unreadable"] + 1)):
    if top in SKIP or top.startswith(tuple(s + "/" for s in SKIP)) or os.path.realpath(top) == work:
        dirs[:] = []
        continue
    for name in files:
        path = os.path.join(top, name)
        if name in NAMES:
            hits.append(["name " + name, path])
        try:
            if not os.path.isfile(path) or os.path.islink(path) or zlib.crc32(path.encode()) %% PARTS != PART:
                continue
            stats["files"] += 1
            scan(path)
        except (OSError, MemoryError):
            stats["unreadable"] += 1
seen = set()
unique = [h for h in hits if not (tuple(h) in seen or seen.add(tuple(h)))]
import atexit
REPORT = %(report)r + " " + json.dumps({"hits": unique[:5], "count": len(unique), "part": PART, **stats})
print(REPORT, flush=True)
atexit.register(print, REPORT, flush=True)  # again at exit, after what the host program prints
"""


def probe_source(found: dict[str, str] | None = None, part: int = 0, parts: int = 1) -> str:
    """The probe program for ``found`` (default: ``needles()``). With ``parts`` > 1 it reads only
    the files whose path hashes to ``part`` (file names are checked in every part), so that a
    walk can be split over several runs that each fit a short time limit."""
    found = needles() if found is None else found
    if not 0 <= part < parts:
        raise ValueError(f"part: must be in [0, {parts}), got {part!r}")
    encoded = {label: base64.b64encode(text.encode()).decode() for label, text in found.items()}
    packed = base64.b64encode(json.dumps(encoded).encode()).decode()
    return _PROBE % {"needles": packed, "names": NAMES, "report": REPORT, "part": part, "parts": parts}


def read_report(output: str) -> dict[str, Any] | None:
    """The probe's findings from its output (the last report line), or None when it did not finish."""
    found = None
    for match in re.finditer(re.escape(REPORT) + r" (\{.*\})", output):
        try:
            found = json.loads(match.group(1))
        except ValueError:
            found = None
    return found if isinstance(found, dict) and isinstance(found.get("hits"), list) else None


#: the probe's walk, split over this many tool calls, each of which must fit the env's own time limit
PARTS = 24  # small enough to fit a loaded machine (6 timed out with the demo and the tests on 2 cores)


def _tools(info: dict[str, Any]) -> dict[str, set[str]]:
    out = {}
    for spec in info.get("tools") or []:
        fn = spec.get("function") or spec
        out[fn.get("name")] = set((fn.get("parameters") or {}).get("properties") or {})
    return out


def leak_action(env, info: dict[str, Any], observation: str, code: str) -> str | None:
    """The action that runs Python ``code`` with the env's own code-running tool, as an agent
    would: ``run(code)`` (a function-writing env: the probe runs at import, beside a stub of the
    entry point), ``python(code)`` (a tool env), ``shell(command)`` (a repository env); None when
    the env has none of them."""
    from turngym.check.exploits import _entry_point

    tools = _tools(info)
    if "code" in tools.get("run", ()):
        name = _entry_point(env, info, observation) or "solution"
        program = code + f"\n\ndef {name}(*args, **kwargs):\n    return None\n"
        return json.dumps({"name": "run", "arguments": {"code": program}})
    if "code" in tools.get("python", ()):
        return "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"
    if "command" in tools.get("shell", ()):
        command = f"python3 - <<'TURNGYM_LEAK_PROBE'\n{code}\nTURNGYM_LEAK_PROBE\n"
        return json.dumps({"name": "shell", "arguments": {"command": command}})
    return None


def probe_env(env, task_id: str, seed: int, parts: int = PARTS) -> dict[str, Any] | None:
    """Run the probe inside ``env``'s sandbox through its own tool, in ``parts`` calls. Returns
    {"hits", "count", "files", "missing": [part, output tail] of calls that did not report}, or
    None when the env has no tool that runs code."""
    found = needles()
    out: dict[str, Any] = {"hits": [], "count": 0, "files": 0, "missing": []}
    first, info = env.reset(seed=seed, options={"task_id": task_id})  # the tools are announced here
    if leak_action(env, info, first, "") is None:
        return None
    for part in range(parts):
        action = leak_action(env, info, first, probe_source(found, part, parts))
        observation, _, terminated, truncated, _ = env.step(action)
        report = read_report(observation)
        if report is None:
            out["missing"].append([part, observation[-300:]])
        else:
            out["hits"] += [h for h in report["hits"] if h not in out["hits"]]
            out["count"] += report.get("count", 0)
            out["files"] += report.get("files", 0)
        if terminated or truncated:
            first, info = env.reset(seed=seed, options={"task_id": task_id})
    return out
