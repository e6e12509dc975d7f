"""Procedurally generated repository-repair tasks (the data behind CodeRepair-v0).

A task is a small Python package (2-6 modules, each with 1-3 functions drawn from the
templates in repair_templates.py, names and constants varied by the seed) with a pytest
suite, and one injected bug: a line of one function replaced by a known wrong line
(off-by-one, wrong operator, missing case, wrong default, swapped arguments). Grading follows
SWE-bench: the tests the bug breaks (FAIL_TO_PASS) must pass and all the others
(PASS_TO_PASS) must still pass.

Expected values and which tests the bug breaks are computed here by running the generated
functions (our own template code, never the agent's) in this process.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from string import Template

from turngym.envs.code.patch import make_patch
from turngym.envs.code.repair_templates import MODULES, PACKAGES, TEMPLATES, FunctionTemplate

NUM_TASKS = 2000
TEST_EVERY = 10  # task i is in the test split when i % TEST_EVERY == 0


@dataclass
class RepairRepository:
    task_id: str
    split: str
    package: str
    files: dict[str, str]  # the buggy repository
    fixed_files: dict[str, str]  # the same repository with the bug fixed
    bug_path: str
    bug_kind: str
    bug_function: str
    fail_to_pass: list[str]  # pytest node ids the bug breaks
    pass_to_pass: list[str]
    fix_patch: str

    @property
    def test_files(self) -> dict[str, str]:
        return {p: c for p, c in self.files.items() if p.startswith("tests/")}


def _params(template: FunctionTemplate, rng: random.Random) -> dict[str, str]:
    chosen = {name: rng.choice(values) for name, values in template.params}
    out: dict[str, str] = {}
    if "c" in chosen:
        out.update(c=str(chosen["c"]), c1=str(chosen["c"] + 1))
    if "pair" in chosen:
        a, b = chosen["pair"]
        out.update(
            a=str(a),
            b=str(b),
            ab=str(a * b),
            ab2=str(2 * a * b),
            wa=chosen["words"][0],
            wb=chosen["words"][1],
        )
    if "thresholds" in chosen:
        t1, t2, t3 = chosen["thresholds"]
        out.update(t1=str(t1), t2=str(t2), t3=str(t3), t2m=str((t1 + t2) // 2))
    if "seps" in chosen:
        out.update(sep=chosen["seps"][0], sep2=chosen["seps"][1])
    if "s" in chosen:
        out.update(s=str(chosen["s"]), s6=str(chosen["s"] * 6))
    if "m" in chosen:
        out.update(m=str(chosen["m"]), m1=str(chosen["m"] + 1))
    return out


def _evaluate(source: str, call: str):
    namespace: dict = {}
    exec(compile(source, "<template>", "exec"), namespace)  # our own template code, see module doc
    try:
        return ("ok", eval(call, namespace))
    except Exception as exc:  # noqa: BLE001 - a buggy function may raise anything
        return ("raised", type(exc).__name__)


@lru_cache(maxsize=256)
def generate(index: int) -> RepairRepository:
    """Task ``index`` (0 <= index < NUM_TASKS); the same index always gives the same task."""
    if not 0 <= index < NUM_TASKS:
        raise ValueError(f"task index: {index} is out of range 0..{NUM_TASKS - 1}")
    rng = random.Random(index)
    package = rng.choice(PACKAGES)
    modules = rng.sample(MODULES, rng.randint(2, 6))
    count = min(len(TEMPLATES), len(modules) + rng.randint(0, len(modules)))
    templates = rng.sample(TEMPLATES, count)
    placement = list(modules) + [rng.choice(modules) for _ in range(count - len(modules))]
    instances = []  # (module, template, names, params, source)
    for module, template in zip(placement, templates):
        names = {k: rng.choice(v) for k, v in template.names.items()}
        params = _params(template, rng)
        values = {**names, **params}
        instances.append((module, template, values, Template(template.source).substitute(values)))
    bugged = rng.randrange(len(instances))
    b_module, b_template, b_values, b_source = instances[bugged]
    kind, right, wrong = rng.choice(b_template.bugs)
    right, wrong = Template(right).substitute(b_values), Template(wrong).substitute(b_values)
    if b_source.count(right) != 1:
        raise AssertionError(f"template {b_template.key}: bug text {right!r} must occur exactly once")
    buggy_source = b_source.replace(right, wrong)

    fixed: dict[str, str] = {f"{package}/__init__.py": f'"""The {package} package."""\n'}
    buggy: dict[str, str] = {}
    readme = [f"# {package}", "", "Modules:", ""]
    fail_to_pass, pass_to_pass = [], []
    for module in modules:
        parts = [(i, inst) for i, inst in enumerate(instances) if inst[0] == module]
        header = f'"""The {module} module of the {package} package."""\n\n\n'
        fixed_src = header + "\n\n".join(inst[3] for _, inst in parts)
        buggy_src = header + "\n\n".join(buggy_source if i == bugged else inst[3] for i, inst in parts)
        path = f"{package}/{module}.py"
        fixed[path], buggy[path] = fixed_src, buggy_src
        readme.append(
            f"- `{path}`: " + ", ".join(f"`{v}`" for _, inst in parts for k, v in inst[2].items() if k in inst[1].names)
        )
        test_path = f"tests/test_{module}.py"
        imports = sorted({v for _, inst in parts for k, v in inst[2].items() if k in inst[1].names})
        tests = [f"from {package}.{module} import {', '.join(imports)}\n"]
        for i, (_, template, values, source) in parts:
            for number, (placeholder, args) in enumerate(template.cases):
                name = values[placeholder]
                call = name + Template(args).substitute(values)
                status, expected = _evaluate(source, call)
                if status != "ok":
                    raise AssertionError(f"template {template.key}: {call} raises {expected}")
                test_name = f"test_{name}_{number}"
                tests.append(f"\n\ndef {test_name}():\n    assert {call} == {expected!r}\n")
                node = f"{test_path}::{test_name}"
                broken = i == bugged and _evaluate(buggy_source, call) != ("ok", expected)
                (fail_to_pass if broken else pass_to_pass).append(node)
        fixed[test_path] = "".join(tests)
    buggy = {**fixed, **buggy}
    buggy[f"{package}/__init__.py"] = fixed[f"{package}/__init__.py"]
    fixed["README.md"] = buggy["README.md"] = "\n".join(readme) + "\n"
    if not fail_to_pass:
        raise AssertionError(f"task {index}: the {kind} bug in {b_template.key} breaks no test")
    bug_path = f"{package}/{b_module}.py"
    return RepairRepository(
        task_id=task_id(index),
        split="test" if index % TEST_EVERY == 0 else "train",
        package=package,
        files=dict(sorted(buggy.items())),
        fixed_files=dict(sorted(fixed.items())),
        bug_path=bug_path,
        bug_kind=kind,
        bug_function=b_values[next(iter(b_template.names))],
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        fix_patch=make_patch(bug_path, buggy[bug_path], fixed[bug_path]),
    )


def task_id(index: int) -> str:
    return f"repair-{index:04d}"


def task_index(task_id_: str) -> int:
    prefix, _, number = task_id_.partition("-")
    if prefix != "repair" or not number.isdigit():
        raise ValueError(f"task_id: {task_id_!r} is not of the form repair-NNNN (0000..{NUM_TASKS - 1})")
    return int(number)


def task_ids(split: str) -> list[str]:
    if split not in ("train", "test"):
        raise ValueError(f"split: unknown {split!r}; allowed: train, test")
    return [task_id(i) for i in range(NUM_TASKS) if (i % TEST_EVERY == 0) == (split == "test")]
