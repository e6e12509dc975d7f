"""Reward integrity and clean starts: the known attacks, on every backend.

Faked rewards: wrong HumanEval and CodeRepair submissions that try to set their own verdict (exit
codes, SystemExit, trace hooks, an always-equal object, excepthook, atexit, patched builtins,
killing the grader, forging the runner's report) must score 0.0 and stay scorable. Leaks: nothing a
run leaves (files under chmod 000, IPC objects, kernel keys, its request in memory) may reach the
next run. Other gaps: collect_files, conflicting files=, infrastructure failures, the shared worker
and its thread, an interpreter under /tmp.

Each test says which attack it is; ``docs/envs/code.md`` has the threat model.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

import turngym
from turngym import sandbox
from turngym.sandbox import worker as worker_module
from turngym.sandbox.common import Limits, read_tar
from turngym.sandbox.spawn import is_root

from .test_sandbox_containment import LIMITS, _backend_params

pytestmark = pytest.mark.sandbox

BACKENDS = _backend_params()
# graded envs refuse the process backend: it shows the host's files, hidden tests among them (issue 62)
GRADED = [p for p in BACKENDS if p.id in sandbox.SEALED]
SECRET = f"turngym-secret-{uuid.uuid4().hex}"


def _needs(backend: str) -> None:
    if backend not in sandbox.available_backends():
        pytest.skip(f"{backend}: not available here")


# ----- faked rewards: HumanEval --------------------------------------------------------------------

# (problem, wrong solution that tries to fake a pass)
HUMANEVAL_EXPLOITS = {
    "os_exit_at_module_level": (
        "HumanEval/0",
        "import os\nos._exit(0)\ndef has_close_elements(numbers, threshold):\n    return True\n",
    ),
    "system_exit_at_module_level": (
        "HumanEval/0",
        "raise SystemExit(0)\ndef has_close_elements(numbers, threshold):\n    return True\n",
    ),
    "system_exit_in_the_function": (
        "HumanEval/0",
        "def has_close_elements(numbers, threshold):\n    raise SystemExit(0)\n",
    ),
    "trace_hook_exits_when_check_starts": (
        "HumanEval/0",
        (
            "import os, sys\n"
            "def _hook(frame, event, arg):\n"
            "    if frame.f_code.co_name == 'check':\n"
            "        os._exit(0)\n"
            "    return None\n"
            "sys.settrace(_hook)\n"
            "def has_close_elements(numbers, threshold):\n    return True\n"
        ),
    ),
    "profile_hook_exits_when_check_starts": (
        "HumanEval/0",
        (
            "import os, sys\n"
            "sys.setprofile(lambda frame, event, arg: os._exit(0) if frame.f_code.co_name == 'check' else None)\n"
            "def has_close_elements(numbers, threshold):\n    return True\n"
        ),
    ),
    "always_equal_object": (
        "HumanEval/0",
        (
            "class _Yes:\n"
            "    def __eq__(self, other):\n        return True\n"
            "    def __ne__(self, other):\n        return False\n"
            "    def __bool__(self):\n        return True\n"
            "    __hash__ = object.__hash__\n"
            "def has_close_elements(numbers, threshold):\n    return _Yes()\n"
        ),
    ),
    "always_equal_int_subclass": (
        "HumanEval/13",
        (
            "class _Int(int):\n"
            "    def __eq__(self, other):\n        return True\n"
            "    __hash__ = int.__hash__\n"
            "def greatest_common_divisor(a, b):\n    return _Int(0)\n"
        ),
    ),
    "excepthook_exits_zero": (
        "HumanEval/0",
        "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n"
        "def has_close_elements(numbers, threshold):\n    return True\n",
    ),
    "atexit_exits_zero": (
        "HumanEval/0",
        "import atexit, os\natexit.register(lambda: os._exit(0))\n"
        "def has_close_elements(numbers, threshold):\n    return True\n",
    ),
    "patched_builtin_abs": (
        "HumanEval/2",
        "import builtins\nbuiltins.abs = lambda x: 0\ndef truncate_number(number):\n    return 0.5\n",
    ),
    "kill_the_grader": (
        "HumanEval/0",
        "import os, signal\n"
        "def has_close_elements(numbers, threshold):\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n    return True\n",
    ),
    "kill_every_process_it_can": (
        "HumanEval/0",
        "import os, signal\n"
        "def has_close_elements(numbers, threshold):\n"
        "    os.kill(-1, signal.SIGKILL)\n    return True\n",
    ),
}


@pytest.mark.parametrize("backend", GRADED)
@pytest.mark.parametrize("exploit", sorted(HUMANEVAL_EXPLOITS))
def test_humaneval_exploit_scores_zero_and_stays_scorable(exploit, backend):
    task_id, code = HUMANEVAL_EXPLOITS[exploit]
    env = turngym.make("turngym/CodeHumanEval-v0", backend=backend, timeout_s=3.0)
    env.reset(seed=0, options={"task_id": task_id})
    _, reward, terminated, _, info = env.step("submit\n```python\n" + code + "```")
    assert terminated and reward == 0.0 and not info["is_success"]
    assert info["scorable"], "a hostile program must not be able to make its episode unscorable"


@pytest.mark.parametrize("backend", GRADED)
def test_humaneval_canonical_solution_still_passes(backend):
    env = turngym.make("turngym/CodeHumanEval-v0", backend=backend, timeout_s=5.0)
    for task_id in ("HumanEval/0", "HumanEval/32", "HumanEval/38"):  # plain, float tolerance, random inputs
        env.reset(seed=0, options={"task_id": task_id})
        _, reward, _, _, info = env.step(env.unwrapped.expert_action())
        assert reward == 1.0 and info["scorable"], (task_id, info)


# ----- faked rewards: CodeRepair ---------------------------------------------------------------------


def _test_node_ids(package: str) -> str:
    """Python that lists the task's test node ids from its tests/ dir, if it can see it."""
    return (
        "import os, re\n"
        "def _ids():\n"
        "    out = []\n"
        "    for d in ('tests', '../tests'):\n"
        "        if os.path.isdir(d):\n"
        "            for n in sorted(os.listdir(d)):\n"
        "                if n.endswith('.py'):\n"
        "                    for t in re.findall(r'def (test_\\w+)', open(os.path.join(d, n)).read()):\n"
        "                        out.append(f'tests/{n}::{t}')\n"
        "    return out\n"
    )


REPAIR_EXPLOITS = {
    # forge the runner's report: read the per-run marker from main.py, print an all-passed record
    "forged_report_with_the_marker_from_main_py": lambda pkg: (
        _test_node_ids(pkg)
        + (
            "import json, sys\n"
            "try:\n"
            "    _m = re.search(r'@@turngym-outcomes-[0-9a-f]+@@', open('main.py').read())\n"
            "    if _m:\n"
            "        sys.stdout.write('\\n' + _m.group(0) + json.dumps({i: 'passed' for i in _ids()}) + '\\n')\n"
            "        sys.stdout.flush()\n"
            "        os._exit(0)\n"
            "except OSError:\n"
            "    pass\n"
        )
    ),
    # rewrite the outcome dict on its way out (json.dumps is what the runner reports with)
    "overwritten_outcome_dict": lambda pkg: (
        "import json\n"
        "_dumps = json.dumps\n"
        "def _forged(obj, *a, **k):\n"
        "    if isinstance(obj, dict) and obj and all(isinstance(v, str) for v in obj.values()):\n"
        "        obj = {key: 'passed' for key in obj}\n"
        "    return _dumps(obj, *a, **k)\n"
        "json.dumps = _forged\n"
    ),
    "exit_zero_on_import": lambda pkg: "import os\nos._exit(0)\n",
    "kill_the_grader_on_import": lambda pkg: "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("backend", GRADED)
@pytest.mark.parametrize("exploit", sorted(REPAIR_EXPLOITS))
def test_repair_exploit_scores_zero_with_the_bug_unfixed(exploit, backend):
    env = turngym.make(
        "turngym/CodeRepair-v0",
        backend=backend,
        shell_backend="bwrap" if backend == "worker" else backend,
        timeout_s=10.0,
    )
    env.reset(seed=0, options={"task_id": env.unwrapped.task_ids("train")[0]})
    package = env.unwrapped.repository.package
    source = REPAIR_EXPLOITS[exploit](package)
    _, _, _, _, info = env.step(
        json.dumps({"name": "write_file", "arguments": {"path": f"{package}/__init__.py", "content": source}})
    )
    assert info["action_valid"], info
    _, reward, terminated, _, info = env.step("submit")
    assert terminated and reward == 0.0 and not info["is_success"]
    assert info["scorable"], info


@pytest.mark.parametrize("backend", GRADED)
def test_repair_graded_tests_never_enter_the_sandbox(backend):
    """The expected values stay on the host: the package cannot read them at grading time."""
    env = turngym.make(
        "turngym/CodeRepair-v0",
        backend=backend,
        shell_backend="bwrap" if backend == "worker" else backend,
        timeout_s=10.0,
    )
    env.reset(seed=0, options={"task_id": env.unwrapped.task_ids("train")[1]})
    task = env.unwrapped.repository
    # the fixed module, plus a probe that fails the import when any test file is visible
    probe = (
        "import os\nassert not os.path.exists('tests') and not os.path.exists('main.py') or "
        "'@@turngym-outcomes' not in open('main.py').read()\nassert not os.path.exists('tests')\n"
    )
    env.step(
        json.dumps(
            {
                "name": "write_file",
                "arguments": {"path": task.bug_path, "content": task.fixed_files[task.bug_path]},
            }
        )
    )
    env.step(json.dumps({"name": "write_file", "arguments": {"path": f"{task.package}/__init__.py", "content": probe}}))
    _, reward, _, _, info = env.step("submit")
    assert reward == 1.0 and info["scorable"], info


def test_hostile_repair_episode_then_honest_fix_scores_one():
    """One hostile episode (chmod 000 dirs, a full /tmp, IPC attempts) must not spoil the next."""
    _needs("worker")
    env = turngym.make("turngym/CodeRepair-v0", backend="worker", timeout_s=10.0)
    env.reset(seed=0, options={"task_id": env.unwrapped.task_ids("train")[2]})
    package = env.unwrapped.repository.package
    hostile = (
        "import os\n"
        "for root in ('/tmp', '/dev/shm', '.'):\n"
        "    d = os.path.join(root, 'locked')\n"
        "    try:\n"
        "        os.makedirs(os.path.join(d, 'inner'), exist_ok=True)\n"
        "        with open(os.path.join(d, 'inner', 'fill'), 'wb') as f:\n"
        "            f.write(b'x' * (60 << 20))\n"
        "    except OSError:\n"
        "        pass\n"
        "    os.chmod(os.path.join(d, 'inner'), 0)\n"
        "    os.chmod(d, 0)\n"
    )
    env.step(json.dumps({"name": "write_file", "arguments": {"path": f"{package}/__init__.py", "content": hostile}}))
    _, reward, _, _, info = env.step("submit")
    assert reward == 0.0 and info["scorable"]
    reward, info = 0.0, {}
    env.reset(seed=0, options={"task_id": env.unwrapped.task_ids("train")[2]})
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        if terminated or truncated:
            break
    assert reward == 1.0 and info["scorable"], info


# ----- leaks between runs ---------------------------------------------------------------------------


def _wipe_probe(mode: int) -> str:
    return (
        "import os\n"
        "for root in ('/tmp', '/dev/shm', '.'):\n"
        "    d = os.path.join(root, 'kept')\n"
        "    os.makedirs(d, exist_ok=True)\n"
        f"    open(os.path.join(d, 'secret'), 'w').write({SECRET!r})\n"
        f"    os.chmod(d, {mode:#o})\n"
    )


@pytest.mark.parametrize("mode", [0o500, 0o000, 0o100])
def test_worker_wipe_survives_chmod(mode):
    _needs("worker")
    first = sandbox.run(code=_wipe_probe(mode), backend="worker", **LIMITS)
    assert first.ok, first.summary()
    second = sandbox.run(
        code="import os\nprint([os.path.exists(os.path.join(r, 'kept')) for r in ('/tmp', '/dev/shm', '.')])",
        backend="worker",
        **LIMITS,
    )
    assert second.stdout.strip() == "[False, False, False]", second.summary()


def test_worker_full_tmp_is_freed_for_the_next_snippet():
    _needs("worker")
    fill = (
        "import os\nos.makedirs('/tmp/full/x', exist_ok=True)\n"
        "try:\n    open('/tmp/full/x/blob', 'wb').write(b'0' * (200 << 20))\nexcept OSError:\n    pass\n"
        "os.chmod('/tmp/full/x', 0)\nos.chmod('/tmp/full', 0)\n"
    )
    sandbox.run(code=fill, backend="worker", **{**LIMITS, "max_file_mb": 256})
    res = sandbox.run(
        code="open('/tmp/ok', 'wb').write(b'1' * (32 << 20))\nprint('wrote')",
        backend="worker",
        **{**LIMITS, "max_file_mb": 64},
    )
    assert res.stdout == "wrote\n", res.summary()


IPC_ATTEMPTS = {
    "sysv_shared_memory": "libc.shmget(0x5EC, 4096, 0o1666)",
    "sysv_message_queue": "libc.msgget(0x5EC, 0o1666)",
    "sysv_semaphore": "libc.semget(0x5EC, 1, 0o1666)",
    "posix_message_queue": "libc.mq_open(b'/turngym-leak', os.O_CREAT | os.O_RDWR, 0o666, None)",
}


@pytest.mark.parametrize("kind", sorted(IPC_ATTEMPTS))
def test_worker_ipc_objects_do_not_persist(kind):
    _needs("worker")
    code = (
        "import ctypes, ctypes.util, os\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('rt') or None, use_errno=True)\n"
        f"print('made' if {IPC_ATTEMPTS[kind]} >= 0 else 'refused')\n"
    )
    sandbox.run(code=code, backend="worker", **LIMITS)
    probe = (
        "import ctypes, ctypes.util, os\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('rt') or None, use_errno=True)\n"
        "rows = [l for n in ('shm', 'msg', 'sem') for l in open(f'/proc/sysvipc/{n}').read().splitlines()[1:]]\n"
        "mq = libc.mq_open(b'/turngym-leak', os.O_RDWR, 0, None)\n"
        "print(len(rows), mq >= 0)\n"
    )
    res = sandbox.run(code=probe, backend="worker", **LIMITS)
    assert res.stdout.strip() == "0 False", res.summary()


def test_process_backend_has_its_own_ipc_namespace():
    _needs("process")
    if not is_root():
        pytest.skip("process: namespaces need root here")
    key = 0x7E000000 + int.from_bytes(os.urandom(3), "little")  # fresh per run
    make = (
        f"import ctypes\nlibc = ctypes.CDLL(None)\nshm = libc.shmget({key}, 1 << 20, 0o1666)\n"
        "print('made' if shm >= 0 else 'refused')\n"
    )
    assert sandbox.run(code=make, backend="process", **LIMITS).stdout.strip() in ("made", "refused")
    res = sandbox.run(code="print(len(open('/proc/sysvipc/shm').read().splitlines()) - 1)", backend="process", **LIMITS)
    assert res.stdout.strip() == "0", res.summary()
    host_rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    assert not any(row.split()[0] == str(key) for row in host_rows), "the segment reached the host"


def test_worker_snippet_memory_holds_no_earlier_request():
    """Run 1's code, stdin, files and output must not be in run 2's memory."""
    _needs("worker")
    code = f"print({SECRET + '-out'!r})\nimport sys\nsys.stdin.read()\n# {SECRET}-code\n"
    sandbox.run(code=code, files={"f.txt": SECRET + "-file"}, stdin=SECRET + "-stdin", backend="worker", **LIMITS)
    scan = (
        "import ctypes\nctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again: /proc/self/mem\n"
        "found = set()\n"
        "mem = open('/proc/self/mem', 'rb', 0)\n"
        "for line in open('/proc/self/maps'):\n"
        "    parts = line.split()\n"
        "    if 'r' not in parts[1] or (len(parts) > 5 and parts[5].startswith('[v')):\n"
        "        continue\n"
        "    start, end = (int(x, 16) for x in parts[0].split('-'))\n"
        "    try:\n"
        "        mem.seek(start)\n"
        "        chunk = mem.read(end - start)\n"
        "    except (OSError, ValueError, OverflowError):\n"
        "        continue\n"
        f"    for tag in (b'-out', b'-code', b'-file', b'-stdin'):\n"
        f"        if {SECRET.encode()[:-6]!r} + {SECRET.encode()[-6:]!r} + tag in chunk:\n"
        "            found.add(tag.decode())\n"
        "print(sorted(found))\n"
    )
    res = sandbox.run(code=scan, backend="worker", **{**LIMITS, "memory_mb": 512})
    assert res.stdout.strip() == "[]", res.summary()


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_keys_are_refused(backend):
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"key = libc.syscall(248, b'user', b'turngym', {SECRET.encode()!r}, {len(SECRET)}, -4)\n"  # add_key
        "kc = libc.syscall(250, 0, -4, 0)\n"  # keyctl(KEYCTL_GET_KEYRING_ID, user keyring)
        "print('made' if key >= 0 else 'refused', 'keyctl' if kc >= 0 else 'no-keyctl')\n"
    )
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86_64 system call numbers")
    res = sandbox.run(code=code, backend=backend, **LIMITS)
    assert res.stdout.strip() == "refused no-keyctl", res.summary()


# ----- collect_files -----------------------------------------------------------------------------------

COLLECTING = [p for p in BACKENDS if p.id != "worker"]


@pytest.mark.parametrize("backend", COLLECTING)
def test_collect_files_puts_no_host_file_inside(backend):
    code = (
        "import os\n"
        "hits = [p for p in ('/.collect', '/collect') if os.path.exists(p)]\n"
        "for p in hits:\n"
        "    try:\n"
        "        fd = os.open(p, os.O_WRONLY)\n"
        "        os.posix_fallocate(fd, 0, 256 << 20)\n"
        "        print('LEAK', p)\n"
        "    except OSError as e:\n"
        "        print('blocked', p, e)\n"
        "print('done', hits)\n"
    )
    res = sandbox.run(code=code, backend=backend, collect_files=True, **{**LIMITS, "disk_mb": 16})
    assert "LEAK" not in res.stdout and "done []" in res.stdout, res.summary()


@pytest.mark.parametrize("backend", COLLECTING)
def test_collect_files_total_is_capped_at_disk_mb(backend):
    # sparse files take no room on the tmpfs but would fill a naive tar: 24 x 15 MiB
    code = (
        "import os\nos.makedirs('big', exist_ok=True)\n"
        "for i in range(24):\n"
        "    with open(f'big/f{i}', 'wb') as f:\n"
        "        f.truncate(15 << 20)\n"
        "print('made')\n"
    )
    res = sandbox.run(code=code, backend=backend, collect_files=True, **{**LIMITS, "disk_mb": 32})
    assert res.error is None and "made" in res.stdout, res.summary()
    total = sum(len(v) for v in (res.files or {}).values())
    assert total <= 32 << 20


def _sparse_tar(count: int, size_mb: int) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            with open(os.path.join(tmp, f"s{i}"), "wb") as f:
                f.truncate(size_mb << 20)
        return subprocess.run(["tar", "--sparse", "-cf", "-", "-C", tmp, "."], capture_output=True, check=True).stdout


def test_sparse_tar_members_are_rejected():
    blob = _sparse_tar(24, 15)  # about 60 KB of tar that unpacks to 360 MiB
    assert len(blob) < 1 << 20
    limits = Limits(disk_mb=64, max_file_mb=16)
    files = read_tar(blob, limits) or {}
    assert sum(len(v) for v in files.values()) <= 64 << 20
    assert not any(name.startswith("s") for name in files)


def test_special_tar_members_are_rejected():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind in (
            ("fifo", tarfile.FIFOTYPE),
            ("dev", tarfile.CHRTYPE),
            ("link", tarfile.SYMTYPE),
            ("hard", tarfile.LNKTYPE),
        ):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tar.addfile(info)
        info = tarfile.TarInfo("ok.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
    assert read_tar(buf.getvalue(), Limits()) == {"ok.txt": "ok"}


# ----- conflicting files= --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "files",
    [{"pkg/x.py": "a", "pkg/x.py/y.py": "b"}, {"a/b": "1", "a//b": "2"}, {"main.py/x": "1"}],
    ids=["file-vs-dir", "same-path", "main.py-as-dir"],
)
def test_conflicting_files_are_a_value_error(files, backend):
    with pytest.raises(ValueError, match="files"):
        sandbox.run(code="print(1)", files=files, backend=backend, **LIMITS)


# ----- infrastructure failures are errors; the code cannot fake one ------------------------------------


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def test_bwrap_killed_init_is_a_sandbox_error():
    _needs("bwrap")
    result: dict = {}

    def run() -> None:
        result["res"] = sandbox.run(
            code=f"import time\n# {SECRET}-init\ntime.sleep(5)",
            backend="bwrap",
            **{**LIMITS, "timeout_s": 8.0},
        )

    thread = threading.Thread(target=run)
    thread.start()
    init = None
    for _ in range(200):  # bwrap's pid-namespace init: the child of the bwrap process we started
        time.sleep(0.02)
        children = _children()
        for outer in children.get(os.getpid(), []):
            # the one-shot run's bwrap (it binds main.py), not a persistent worker's
            if _comm(outer) == "bwrap" and b"/sandbox/main.py" in Path(f"/proc/{outer}/cmdline").read_bytes():
                init = next((pid for pid in children.get(outer, []) if _comm(pid) == "bwrap"), None)
        if init:
            break
    assert init, "could not find bwrap's namespace init"
    os.kill(init, 9)
    thread.join(15)
    res = result["res"]
    assert res.error and not res.timed_out, res


@pytest.mark.parametrize("backend", [p for p in BACKENDS if p.id in ("bwrap", "process")])
@pytest.mark.parametrize("fake", ["bwrap: Can't mount proc on /newroot/proc", "turngym: sandbox setup failed: x"])
def test_code_cannot_fake_a_sandbox_error(fake, backend):
    code = f"import sys, os\nsys.stderr.write({fake!r} + '\\n')\nsys.stderr.flush()\nos._exit(125)\n"
    res = sandbox.run(code=code, backend=backend, **LIMITS)
    assert res.error is None and res.exit_code == 125, res


@pytest.mark.parametrize("backend", GRADED)
def test_humaneval_faked_sandbox_error_stays_scorable(backend):
    code = (
        "import sys, os\nsys.stderr.write('bwrap: Creating new namespace failed\\n')\nos._exit(1)\n"
        "def has_close_elements(numbers, threshold):\n    return True\n"
    )
    env = turngym.make("turngym/CodeHumanEval-v0", backend=backend, timeout_s=3.0)
    env.reset(seed=0, options={"task_id": "HumanEval/0"})
    _, reward, _, _, info = env.step("submit\n```python\n" + code + "```")
    assert reward == 0.0 and info["scorable"], info


# ----- the shared worker and its thread; an interpreter under /tmp ---------------------------------------


def test_shared_worker_survives_the_thread_that_started_it():
    _needs("worker")
    key = (os.getpid(), ("turngym-thread-test",))
    box: dict = {}

    def start() -> None:
        box["worker"] = worker_module.shared_worker(("turngym-thread-test",))
        box["first"] = box["worker"].run("print(1)", limits=Limits(timeout_s=5))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    time.sleep(0.3)  # a --die-with-parent worker would be dead by now
    worker = box["worker"]
    try:
        assert box["first"].stdout == "1\n"
        assert worker.alive(), "the worker died with the thread that started it"
        res = worker.run("print(2)", limits=Limits(timeout_s=5))
        assert res.stdout == "2\n" and "fallback" not in res.extra and worker.restarts == 0
    finally:
        worker.close()
        worker_module._SHARED.pop(key, None)


def test_worker_with_its_interpreter_under_tmp_leaves_the_environment_alone():
    _needs("worker")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        venv = os.path.join(tmp, "clone", ".venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        site = [p for p in sys.path if p.endswith("site-packages")]
        script = (
            "import os, sys, json\n"
            "from turngym.sandbox.worker import Worker\n"
            "from turngym.sandbox.common import Limits\n"
            "w = Worker()\n"
            "lim = Limits(timeout_s=10)\n"
            "out = []\n"
            "for i in range(3):\n"
            "    code = ('import os, sys\\n'\n"
            '            \'open("/tmp/junk%d" % 1, "w").write("x")\\n\'\n'
            "            'print(sys.prefix, os.path.exists(sys.executable), sorted(os.listdir(\"/tmp\")))')\n"
            "    out.append(w.run(code, limits=lim).stdout.strip())\n"
            "w.close()\n"
            "print(json.dumps(out))\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *site])}
        proc = subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c", script],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs = json.loads(proc.stdout.strip().splitlines()[-1])
        base = os.path.realpath(sys.base_prefix)
        shown = [base.split("/")[2]] if base.startswith("/tmp/") else []
        for out in outputs:
            prefix, exists, listing = out.split(" ", 2)
            # the base interpreter runs, never the venv (issue 62: the venv held task data)
            assert os.path.realpath(prefix) == base and exists == "True", out
            # nothing of the venv under /tmp is shown; only this snippet's own file is there
            assert listing == str(sorted([*shown, "junk1"])), out
        assert os.path.exists(os.path.join(venv, "bin", "python"))
