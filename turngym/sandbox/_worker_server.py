"""The persistent worker's server. It runs *inside* a bwrap sandbox (given to ``python -c``, so it
uses the standard library only) and forks one child per snippet.

Protocol on stdin/stdout: a 4-byte big-endian length, then JSON. Request: code, files (base64),
stdin (base64), limits. Reply: stdout/stderr (base64), exit_code, timed_out, truncated, duration_s.
After each snippet every process the snippet left is killed (``kill(-1)`` reaches all of this
uid's processes in the sandbox's pid namespace but the server and the namespace's init) and the
work dir, /tmp and /dev/shm are emptied, so snippets cannot see each other.
"""

import base64
import builtins
import ctypes
import json
import os
import resource
import selectors
import shutil
import signal
import struct
import sys
import time
import traceback

WORK = "/sandbox"


def _read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _reply(fd, obj):
    data = json.dumps(obj).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _wipe(path):
    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def _child(req, out_w, err_w, in_r):
    os.setsid()
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    os.closerange(3, 1024)
    lim = req["limits"]
    mem = lim["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(lim["timeout_s"]) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    size = lim["max_file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["max_open_files"], lim["max_open_files"]))
    os.chdir(WORK)
    for rel, data in req["files"].items():
        parent = os.path.dirname(rel)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(rel, "wb") as f:
            f.write(base64.b64decode(data))
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.argv = ["main.py"]
    sys.path.insert(0, WORK)
    code = 0
    try:
        exec(compile(req["code"], "main.py", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        etype, exc, tb = sys.exc_info()
        traceback.print_exception(etype, exc, tb.tb_next)  # from the snippet's frame on
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code & 0xFF)


def _run(req):
    lim = req["limits"]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            os.close(err_r)
            os.close(in_w)
            _child(req, out_w, err_w, in_r)
        finally:
            os._exit(120)
    for fd in (out_w, err_w, in_r):
        os.close(fd)
    stdin_data = base64.b64decode(req.get("stdin") or "")
    try:  # small stdin fits the pipe buffer; larger input is cut at 64 KiB
        os.set_blocking(in_w, False)
        os.write(in_w, stdin_data[:65536])
    except OSError:
        pass
    os.close(in_w)
    sel = selectors.DefaultSelector()
    chunks = {out_r: [], err_r: []}
    sizes = {out_r: 0, err_r: 0}
    for fd in (out_r, err_r):
        sel.register(fd, selectors.EVENT_READ)
    deadline = started + lim["timeout_s"]
    cap = lim["max_output_bytes"]
    timed_out = truncated = False
    status = None
    open_fds = 2
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                deadline = min(deadline, now + 0.05)  # leftovers holding the pipes: stop soon
        for key, _ in sel.select(timeout=min(deadline - now, 0.05)):
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fd)
                open_fds -= 1
                continue
            room = cap - sizes[key.fd]
            if room > 0:
                chunks[key.fd].append(data[:room])
            sizes[key.fd] += len(data)
            if sizes[key.fd] > cap:
                truncated = True
                open_fds = 0
                break
    while status is None and not timed_out and not truncated:
        # the pipes closed: let the snippet finish exiting before its leftovers are killed
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() >= started + lim["timeout_s"]:
            timed_out = True
        else:
            time.sleep(0.0002)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if status is None:
        _, status = os.waitpid(pid, 0)
    _kill_everything()
    if timed_out and os.WIFEXITED(status):
        timed_out = False  # the snippet exited in time; only its leftovers were cut
    for fd in (out_r, err_r):
        try:
            sel.unregister(fd)
        except (KeyError, ValueError):
            pass
        os.close(fd)
    sel.close()
    _reap()
    for path in (WORK, "/tmp", "/dev/shm"):
        _wipe(path)
    if os.WIFEXITED(status):
        exit_code = os.WEXITSTATUS(status)
    else:
        exit_code = -os.WTERMSIG(status)
    return {"stdout": base64.b64encode(b"".join(chunks[out_r])).decode(),
            "stderr": base64.b64encode(b"".join(chunks[err_r])).decode(),
            "exit_code": exit_code, "timed_out": timed_out, "truncated": truncated,
            "duration_s": time.monotonic() - started}


def _kill_everything():
    for _ in range(200):
        try:  # every process of this uid but the server and the namespace's init
            os.kill(-1, signal.SIGKILL)
        except OSError:
            return
        time.sleep(0.001)


def _reap():
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not done:
            return


def main():
    # kill(-1) below must only ever reach this sandbox: refuse to serve as root or outside a new
    # pid namespace (where bwrap's init is pid 1 and this server a low pid)
    if os.geteuid() == 0 or os.getpid() > 8:
        sys.stderr.write("worker server: not inside an unprivileged pid-namespace sandbox; refusing\n")
        sys.exit(3)
    # not dumpable: snippets (same uid) can neither ptrace the server nor open its /proc fds
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for name in json.loads(os.environ.get("TURNGYM_PRELOAD", "[]")):
        try:
            __import__(name)
        except ImportError:
            pass
    os.chdir(WORK)
    req_fd, resp_fd = os.dup(0), os.dup(1)
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _reply(resp_fd, {"ready": True})
    while True:
        try:
            (n,) = struct.unpack(">I", _read_exact(req_fd, 4))
            req = json.loads(_read_exact(req_fd, n))
        except EOFError:
            return
        _reply(resp_fd, _run(req))


main()
