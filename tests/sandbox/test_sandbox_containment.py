"""Hostile-code battery: every program runs against every available backend and must be contained.

Each program is Python source (shell attacks go through ``subprocess``) plus a check on the
Result. After every run the fixture also checks the host: no process of the sandbox's uid is
left, nothing carrying the test's marker exists outside, and the test process itself is alive.
Limits are small (3 s, or 1.5 s where the program runs until killed; 256 MB, 64 MB tmpfs,
32 processes) so a failure cannot hurt the machine.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from turngym import sandbox
from turngym.sandbox.docker_backend import docker_unavailable_reason
from turngym.sandbox.seccomp import user_namespace_filter
from turngym.sandbox.spawn import is_root, processes_of_uid

pytestmark = pytest.mark.sandbox

AVAILABLE = sandbox.available_backends()


def _backend_params(hostile: bool = True) -> list:
    params = []
    for name in ("bwrap", "process", "worker", "docker"):
        reason = None
        if name == "docker":
            reason = docker_unavailable_reason()
        elif name not in AVAILABLE:
            reason = (
                "cannot create mount and network namespaces here"
                if name == "process"
                else "bubblewrap is not installed or cannot create namespaces here"
            )
        elif name == "process" and hostile and not is_root():
            # without root there is no uid drop: kill(-1) or a fork bomb would hit the caller's own
            # processes (docs/envs/code.md); CI runs the battery as root
            reason = "not root here, so no unprivileged uid to contain hostile code"
        marks = [pytest.mark.sandbox] + ([pytest.mark.skip(reason=f"{name}: {reason}")] if reason else [])
        params.append(pytest.param(name, marks=marks, id=name))
    return params


LIMITS = {
    "timeout_s": 3.0,
    "memory_mb": 256,
    "disk_mb": 64,
    "max_processes": 32,
    "max_file_mb": 16,
    "max_output_bytes": 100_000,
}
UNTIL_KILLED_S = 1.5  # for programs that only stop when the sandbox kills them
MARKER = f"turngym-hostile-{uuid.uuid4().hex[:12]}"
SECRET = f"s3cret-{uuid.uuid4().hex}"
# the daemon test's sleeper: a distinctive argument so leftovers can be found in /proc
SLEEP_ARG = f"{300 + int(uuid.uuid4().int % 10_000) / 10_000:.4f}"


def _host_processes_with(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _marker_paths() -> list[str]:
    hits = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/etc", "/usr", os.getcwd(), "/"):
        try:
            hits += [os.path.join(d, n) for n in os.listdir(d) if MARKER in n]
        except OSError:
            continue
    return hits


@pytest.fixture
def host_guard(monkeypatch):
    """Plant a secret in our environment; afterwards, check that the host is unchanged."""
    monkeypatch.setenv("TURNGYM_TEST_SECRET", SECRET)
    before = set(_marker_paths())
    runs: list[sandbox.Result] = []
    yield runs
    assert set(_marker_paths()) == before, "a hostile program left files on the host"
    assert not _host_processes_with(SLEEP_ARG), "a daemon outlived its run"
    for res in runs:
        uid = res.extra.get("uid")
        if uid is None or uid == os.getuid():
            continue
        left = processes_of_uid(uid)
        if res.backend == "worker":
            # the server itself and the runner it has forked, waiting for the next request
            assert len(left) <= 2, f"snippet leftovers in the worker: {left}"
        else:
            assert not left, f"processes of the sandbox uid {uid} are still alive: {left}"


def _run(backend: str, code: str, runs: list, **kw) -> sandbox.Result:
    res = sandbox.run(code=code, backend=backend, **{**LIMITS, **kw})
    runs.append(res)
    assert res.backend == backend
    return res


def _contained(res: sandbox.Result) -> None:
    """The run ended (any way but a sandbox failure) and printed no LEAK line."""
    assert "LEAK" not in res.stdout, res.stdout
    if res.backend != "worker":  # the worker may be killed by its own snippet: then error is set
        assert res.error is None, res.error


def _try(expr: str) -> str:
    """Python lines that run ``expr`` and print LEAK if it succeeds."""
    return f"try:\n    {expr}\n    print('LEAK', {expr!r})\nexcept BaseException as e:\n    print('blocked', type(e).__name__)\n"


# ----- network --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", _backend_params())
def test_connect_to_host_loopback_listener(backend, host_guard):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        port = server.getsockname()[1]
        code = "import socket\ns = socket.socket(); s.settimeout(1)\n" + _try(f"s.connect(('127.0.0.1', {port}))")
        res = _run(backend, code, host_guard)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody got through
    _contained(res)
    assert "blocked" in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_connect_to_external_address(backend, host_guard):
    code = "import socket\ns = socket.socket(); s.settimeout(1)\n" + _try("s.connect(('192.0.2.1', 80))")
    res = _run(backend, code, host_guard)
    _contained(res)
    assert "blocked" in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_only_loopback_interface(backend, host_guard):
    res = _run(backend, "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))", host_guard)
    _contained(res)
    assert res.stdout.strip() == "['lo']"


@pytest.mark.parametrize("backend", _backend_params())
def test_udp_send_outside(backend, host_guard):
    code = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n" + _try(
        "s.sendto(b'x', ('192.0.2.1', 53))"
    )
    res = _run(backend, code, host_guard)
    _contained(res)


# ----- file system ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", _backend_params())
def test_write_to_etc_and_usr(backend, host_guard):
    code = "".join(_try(f"open('{d}/{MARKER}', 'w').write('x')") for d in ("/etc", "/usr", "/"))
    res = _run(backend, code, host_guard)
    _contained(res)
    assert res.stdout.count("blocked") == 3


@pytest.mark.parametrize("backend", _backend_params())
def test_write_to_world_writable_host_dirs(backend, host_guard):
    shared = Path("/tmp") / f"{MARKER}-shared-dir"
    shared.mkdir(mode=0o777, exist_ok=True)
    shared.chmod(0o777)
    try:
        # the sandbox may have its own /tmp and /dev/shm; nothing may reach the host's
        code = "".join(
            f"try:\n    open('{path}', 'w').write('x')\nexcept OSError:\n    pass\n"
            for path in (f"{shared}/written", f"/dev/shm/{MARKER}", f"/var/tmp/{MARKER}")
        )
        res = _run(backend, code, host_guard)
        _contained(res)
        assert not (shared / "written").exists()
    finally:
        for p in shared.iterdir():
            p.unlink()
        shared.rmdir()


@pytest.mark.parametrize("backend", _backend_params())
def test_write_to_the_callers_directory(backend, host_guard):
    code = _try(f"open('{os.getcwd()}/{MARKER}', 'w').write('x')")
    res = _run(backend, code, host_guard)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_write_to_own_interpreter(backend, host_guard):
    code = (
        "import os, sys\n"
        + _try("open(sys.executable, 'ab').write(b'')")
        + _try("open(os.__file__, 'a').write('#')")
        + _try("os.chmod(sys.executable, 0o777)")
    )
    res = _run(backend, code, host_guard)
    _contained(res)
    assert res.stdout.count("blocked") == 3


@pytest.fixture
def root_secret():
    """A secret file in /root (root only), as private data of the host's user."""
    path = Path("/root") / f"{MARKER}-secret"
    if is_root():
        path.write_text(SECRET)
        path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.parametrize("backend", _backend_params())
def test_read_root_home(backend, host_guard, root_secret):
    code = (
        "import os\n"
        + "print(os.listdir('/root') if os.path.isdir('/root') else None)\n"
        + _try(f"open('{root_secret}').read()")
    )
    res = _run(backend, code, host_guard)
    _contained(res)
    assert MARKER not in res.stdout and SECRET not in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_read_shadow_file(backend, host_guard):
    res = _run(backend, _try("open('/etc/shadow').read()"), host_guard)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_read_parent_environment_secrets(backend, host_guard):
    code = f"""
import os
secret = {SECRET!r}
if any(secret in v for v in os.environ.values()):
    print('LEAK env')
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            if secret.encode() in open(f'/proc/{{pid}}/environ', 'rb').read():
                print('LEAK /proc', pid)
        except OSError:
            pass
print('done')
"""
    res = _run(backend, code, host_guard)
    _contained(res)
    assert "done" in res.stdout and SECRET not in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_symlink_escape(backend, host_guard, root_secret):
    code = (
        "import os\nos.symlink('/root', 'r')\nos.symlink('/etc/shadow', 's')\nprint(os.listdir('r'))\n"
        + _try(f"open('r/{root_secret.name}').read()")
        + _try("open('s').read()")
    )
    res = _run(backend, code, host_guard)
    _contained(res)
    assert MARKER not in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_symlink_in_collected_files(backend, host_guard):
    if backend == "worker":
        pytest.skip("worker: collect_files is not supported (the check is for bwrap/process/docker)")
    code = (
        "import os\nos.symlink('/etc/passwd', 'leak.txt')\nos.symlink('/', 'rootdir')\nopen('ok.txt','w').write('ok')"
    )
    res = _run(backend, code, host_guard, collect_files=True)
    _contained(res)
    assert res.files is not None and res.files.get("ok.txt") == "ok"
    assert "leak.txt" not in res.files and not any(k.startswith("rootdir") for k in res.files)


@pytest.mark.parametrize("backend", _backend_params())
def test_path_traversal_in_files_is_refused(backend, host_guard):
    for bad in ("../escape.txt", "/etc/escape.txt", "a/../../escape.txt"):
        with pytest.raises(ValueError, match="files"):
            sandbox.run(code="print(1)", files={bad: "x"}, backend=backend, **LIMITS)


# ----- resources --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", _backend_params())
def test_fork_bomb(backend, host_guard):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    res = _run(backend, code, host_guard, timeout_s=UNTIL_KILLED_S)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_shell_fork_bomb(backend, host_guard):
    code = "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'b() { b | b & }; b'])\nimport time; time.sleep(5)"
    res = _run(backend, code, host_guard, timeout_s=UNTIL_KILLED_S)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_thread_bomb(backend, host_guard):
    code = """
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except BaseException as e:
    print('stopped at', n, type(e).__name__)
"""
    res = _run(backend, code, host_guard, timeout_s=UNTIL_KILLED_S)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_memory_bomb(backend, host_guard):
    # the bomb ends at the memory limit within a second; the longer deadline only keeps a loaded
    # machine (a container's start, two test workers) from ending it by time first
    res = _run(
        backend, "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n", host_guard, timeout_s=15.0
    )
    _contained(res)
    assert res.out_of_memory and res.exit_code != 0


@pytest.mark.parametrize("backend", _backend_params())
def test_one_huge_allocation(backend, host_guard):
    res = _run(backend, "x = bytearray(64 << 30)\nprint('LEAK allocated')", host_guard)
    _contained(res)
    assert res.out_of_memory


@pytest.mark.parametrize("backend", _backend_params())
def test_cpu_loop(backend, host_guard):
    res = _run(backend, "while True:\n    pass\n", host_guard, timeout_s=UNTIL_KILLED_S)
    _contained(res)
    assert res.timed_out and not res.ok


@pytest.mark.parametrize("backend", _backend_params())
def test_sleep_forever(backend, host_guard):
    res = _run(backend, "import time\ntime.sleep(10**6)\n", host_guard, timeout_s=UNTIL_KILLED_S)
    _contained(res)
    assert res.timed_out


@pytest.mark.parametrize("backend", _backend_params())
def test_one_gigabyte_of_stdout(backend, host_guard):
    code = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(chunk)\n"
    res = _run(backend, code, host_guard)
    _contained(res)
    assert res.output_truncated and len(res.stdout) <= LIMITS["max_output_bytes"]


@pytest.mark.parametrize("backend", _backend_params())
def test_stderr_flood(backend, host_guard):
    res = _run(backend, "import sys\nwhile True:\n    sys.stderr.write('e' * 65536)\n", host_guard)
    _contained(res)
    assert len(res.stderr) <= LIMITS["max_output_bytes"]


@pytest.mark.parametrize("backend", _backend_params())
def test_disk_fill(backend, host_guard):
    code = """
import os
written = 0
for d in ('.', '/tmp', '/dev/shm', '/var/tmp'):
    for i in range(10_000):
        try:
            with open(os.path.join(d, f'fill{i}'), 'wb') as f:
                f.write(b'x' * (8 << 20))
            written += 8
        except OSError as e:
            print(d, 'stopped:', e.strerror)
            break
print('MB', written)
"""
    res = _run(backend, code, host_guard, timeout_s=3.0)
    _contained(res)
    if not res.timed_out:
        written = int(res.stdout.split("MB")[-1])
        assert written <= 4 * LIMITS["disk_mb"] + 32  # bounded by the tmpfs sizes


@pytest.mark.parametrize("backend", _backend_params())
def test_file_size_limit(backend, host_guard):
    code = _try("open('big', 'wb').write(b'x' * (40 << 20))")
    res = _run(backend, code, host_guard)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_open_files_limit(backend, host_guard):
    code = "fs = []\ntry:\n    while True:\n        fs.append(open('/dev/null'))\nexcept OSError:\n    print('open', len(fs))\n"
    res = _run(backend, code, host_guard, max_open_files=64)
    _contained(res)
    if res.backend != "docker":
        assert int(res.stdout.split()[-1]) < 64


# ----- processes and privileges ---------------------------------------------------------------


@pytest.mark.parametrize("backend", _backend_params())
def test_kill_the_parent(backend, host_guard):
    code = "import os, signal\n" + "".join(_try(f"os.kill({p}, signal.SIGKILL)") for p in ("os.getppid()", "1"))
    res = _run(backend, code, host_guard)
    assert "LEAK" not in res.stdout or backend == "worker"  # the worker's parent is its own server
    assert sandbox.run(code="print('still here')", backend=backend, **LIMITS).stdout == "still here\n"


@pytest.mark.parametrize("backend", _backend_params())
def test_kill_every_process_it_can(backend, host_guard):
    res = _run(
        backend,
        "import os, signal, time\nos.kill(-1, signal.SIGKILL)\ntime.sleep(0.5)\nprint('alive')",
        host_guard,
    )
    assert res.error is None or backend == "worker"
    assert sandbox.run(code="print('still here')", backend=backend, **LIMITS).stdout == "still here\n"


@pytest.mark.parametrize("backend", _backend_params())
def test_daemon_does_not_outlive_the_run(backend, host_guard):
    code = f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv('/bin/sleep', ['sleep', '{SLEEP_ARG}'])
    os._exit(0)
print('parent done')
"""
    res = _run(backend, code, host_guard)
    _contained(res)
    assert "parent done" in res.stdout
    assert not _host_processes_with(SLEEP_ARG)


@pytest.mark.parametrize("backend", _backend_params())
def test_ptrace_the_parent(backend, host_guard):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for pid in (os.getppid(), 1):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print('LEAK attached', pid)
    try:
        open(f'/proc/{pid}/mem', 'rb').read(1)
        print('LEAK mem', pid)
    except OSError as e:
        print('blocked', e.errno)
"""
    res = _run(backend, code, host_guard)
    if backend == "worker":  # the server is the same uid but not dumpable: attach still fails
        assert "LEAK attached" not in res.stdout
    else:
        _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_setuid_to_root(backend, host_guard):
    code = (
        "import os\n"
        + _try("os.setuid(0)")
        + _try("os.setgid(0)")
        + _try("os.setgroups([0])")
        + """
status = open('/proc/self/status').read()
caps = [l.split()[1] for l in status.splitlines() if l.startswith(('CapEff', 'CapPrm'))]
if any(int(c, 16) for c in caps):
    print('LEAK capabilities', caps)
print('uid', os.getuid(), 'NoNewPrivs', [l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')])
"""
    )
    res = _run(backend, code, host_guard)
    _contained(res)
    assert "uid 0" not in res.stdout
    if is_root() and backend != "docker":
        assert "NoNewPrivs ['1']" in res.stdout


@pytest.mark.parametrize("backend", _backend_params())
def test_setuid_binary(backend, host_guard):
    code = (
        "import subprocess\nr = subprocess.run(['su', 'root', '-c', 'id -u'], capture_output=True, text=True,"
        " stdin=subprocess.DEVNULL, timeout=1.5)\nif r.stdout.strip() == '0':\n    print('LEAK su')\n"
    )
    res = _run(backend, code, host_guard)
    _contained(res)


@pytest.mark.parametrize("backend", _backend_params())
def test_user_namespace_gives_nothing(backend, host_guard, root_secret):
    code = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER: "root" inside, nobody outside
    for path in ('{root_secret}', '/etc/shadow'):
        try:
            open(path).read()
            print('LEAK', path)
        except OSError as e:
            print('blocked', path, e.errno)
else:
    print('no user namespace', ctypes.get_errno())
"""
    res = _run(backend, code, host_guard)
    _contained(res)
    if is_root() and backend != "docker" and user_namespace_filter() is not None:
        assert "no user namespace 1" in res.stdout  # EPERM from the seccomp filter


@pytest.mark.parametrize("backend", _backend_params())
def test_mount_and_system_writes(backend, host_guard):
    code = (
        "import ctypes, socket\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        + """
if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:
    print('LEAK mount')
"""
        + _try("open('/proc/sysrq-trigger', 'w').write('h')")
        + _try("socket.sethostname('owned')")
        + _try("open('/dev/mem', 'rb').read(1)")
        + _try("socket.socket(socket.AF_PACKET, socket.SOCK_RAW)")
    )
    res = _run(backend, code, host_guard)
    _contained(res)
    assert socket.gethostname() != "owned"
