"""``turngym serve-env``: many sessions of any registered env behind an HTTP API.

A session is one env instance owned by one client. The API mirrors Gymnasium's:

    POST   /sessions                      {"env_id", "env_kwargs"}   -> {"session_id", ...}
    POST   /sessions/{id}/reset           {"seed", "options"}        -> {"observation", "info"}
    POST   /sessions/{id}/step            {"action"}                 -> {"observation", "reward",
                                                                        "terminated", "truncated", "info"}
    POST   /sessions/{id}/expert_step     {}                         -> the step, plus "action"
    GET    /sessions/{id}                 tools, admissible actions, instructions, turn
    GET    /sessions/{id}/task_ids?split= the env's task ids
    DELETE /sessions/{id}
    POST   /batch                         {"ops": [{"op": "reset" | "step" | ..., ...}]}
    GET    /envs, /stats, /health, /openapi.json (the schema), /docs
    /openenv/{env_id}/...                 the same envs for OpenEnv clients (``turngym.integrations.openenv``)

``info`` is the env's StepInfo, as JSON. Env calls run on worker threads (``EnvWorkers``), at
most one at a time per session; different sessions run in parallel. Limits (``ServerLimits``):
how many sessions may be open, how long one env call may take (past it the session is dropped
and the answer says ``scorable: false``: a hung env must not pass for a reward of 0), how long a
session may sit idle before it is closed, and the longest action. A hung call costs only its
session: its thread is written off and replaced, so hangs never use up the workers. An env
that raises (``SystemExit`` included) answers 500 with ``scorable: false`` and is rebuilt at the
next reset. The caller's mistakes answer 4xx naming the field: a bad seed, options or split
400, a step before reset or after the episode ended 409. With ``token`` set, every route but
/health needs ``Authorization: Bearer TOKEN``, or the token as a path prefix ``/token/TOKEN/...``
(for clients that send no headers, such as OpenEnv's).
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.
import asyncio
import ctypes
import hmac
import queue
import threading
import time
import traceback
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import turngym


@dataclass
class ServerLimits:
    max_sessions: int = 1024
    step_timeout_s: float = 60.0        # one reset/step/close call
    idle_timeout_s: float = 600.0       # a session untouched this long is closed
    max_action_chars: int = 100_000
    workers: int = 32                   # threads running env calls

    def __post_init__(self):
        for name in ("max_sessions", "max_action_chars", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        for name in ("step_timeout_s", "idle_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")


class SessionError(Exception):
    """A request the server refuses; ``status`` is its HTTP code."""

    def __init__(self, status: int, message: str, scorable: bool = True):
        super().__init__(message)
        self.status, self.message, self.scorable = status, message, scorable


# What an env may raise that must end its episode, not the server: SystemExit from env code
# (sys.exit in a tool, say) would otherwise stop uvicorn. Not BaseException: the exception
# that stops a written-off thread must get through.
ENV_FAILURES = (Exception, SystemExit, KeyboardInterrupt)


class WrittenOff(BaseException):
    """Raised inside a thread whose env call was written off, to stop it (a BaseException, so an
    env's own ``except Exception`` cannot swallow it)."""


class EnvWorkers:
    """The threads that run env calls, ``size`` at a time.

    A call past its deadline is written off (``write_off``): a fresh thread takes its place at
    once, so hung calls never use up the workers, and the stuck thread is asked to stop by an
    exception raised inside it. That ends a hang in Python code; a thread blocked inside C code
    ends when that call returns, and ``hung()`` counts it until then.
    """

    def __init__(self, size: int):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.running: dict[Future, threading.Thread] = {}
        self.written_off: set[threading.Thread] = set()
        self.threads: set[threading.Thread] = set()
        for _ in range(size):
            self._spawn()

    def _spawn(self) -> None:
        thread = threading.Thread(target=self._work, daemon=True, name="turngym-env-call")
        self.threads.add(thread)
        thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self.jobs.put((future, fn, args))
        return future

    def _work(self) -> None:
        me = threading.current_thread()
        try:
            while (job := self.jobs.get()) is not None:
                future, fn, args = job
                if me in self.written_off:  # it finished just as it was written off: leave
                    self.jobs.put(job)
                    return
                if not future.set_running_or_notify_cancel():
                    continue  # timed out while queued
                self.running[future] = me
                try:
                    result, error = fn(*args), None
                except BaseException as e:  # noqa: BLE001 - whatever the env raised ends this call only
                    result, error = None, e
                self.running.pop(future, None)
                if me in self.written_off:
                    return
                if error is None:
                    future.set_result(result)
                elif isinstance(error, Exception):
                    future.set_exception(error)
                else:
                    future.set_exception(RuntimeError(f"{type(error).__name__}: {error}"))
        except BaseException:  # noqa: BLE001 - WrittenOff landing between calls: this thread is done
            pass
        finally:
            self.threads.discard(me)

    def write_off(self, future: Future) -> None:
        """Give up on ``future``'s call: cancel it if it has not started, else replace its thread."""
        thread = self.running.get(future)
        if thread is None:
            future.cancel()
            return
        self.written_off.add(thread)
        self._spawn()
        if self.running.get(future) is thread:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(WrittenOff))

    def hung(self) -> int:
        """Threads written off whose call has not returned yet."""
        self.written_off = {t for t in self.written_off if t.is_alive()}
        return len(self.written_off)

    def status(self) -> dict[str, int]:
        return {"hung_env_calls": self.hung(), "busy_workers": len(self.running) - len(self.written_off),
                "queued_env_calls": self.jobs.qsize()}

    def shutdown(self) -> None:
        for _ in range(len(self.threads)):
            self.jobs.put(None)


@dataclass
class _Session:
    id: str
    env_id: str
    env_kwargs: dict[str, Any]
    env: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    needs_reset: bool = True
    over: str | None = None   # why the episode ended (a step then answers 409), None while it runs
    steps: int = 0


class SessionStore:
    """The sessions of one server, in plain Python (the HTTP layer below is thin)."""

    def __init__(self, limits: ServerLimits | None = None, env_ids: list[str] | None = None):
        self.limits = limits or ServerLimits()
        self.env_ids = set(env_ids) if env_ids else None   # None: every registered env
        self.sessions: dict[str, _Session] = {}
        self.guard = threading.Lock()
        self.counts = {"created": 0, "closed": 0, "expired": 0, "timed_out": 0, "env_errors": 0, "steps": 0}

    # ----- lifecycle ---------------------------------------------------------------------------
    def check_env_id(self, env_id: str):
        """The env's spec, or a 404 naming ``env_id`` (unknown, or not served here)."""
        if self.env_ids is not None and env_id not in self.env_ids:
            raise SessionError(404, f"env_id: {env_id!r} is not served here; served: {sorted(self.env_ids)}")
        try:
            return turngym.spec(env_id)
        except ValueError as e:
            raise SessionError(404, f"env_id: {e}") from None

    def create(self, env_id: str, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
        env_spec = self.check_env_id(env_id)
        with self.guard:
            if len(self.sessions) >= self.limits.max_sessions:
                raise SessionError(429, f"max_sessions: {self.limits.max_sessions} sessions are open; "
                                        "close some or wait for idle ones to expire")
            session = _Session(uuid.uuid4().hex, env_id, dict(env_kwargs or {}))
            self.sessions[session.id] = session
            self.counts["created"] += 1
        try:
            with session.lock:
                session.env = turngym.make(env_id, **session.env_kwargs)
        except ENV_FAILURES as e:
            self._drop(session.id)
            raise SessionError(400, f"env_kwargs: cannot build {env_id}: {type(e).__name__}: {e}") from None
        return {"session_id": session.id, "env_id": env_id, "max_episode_steps": env_spec.max_episode_steps}

    def get(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionError(404, f"session_id: no open session {session_id!r} (closed or expired)")
        session.last_used = time.monotonic()
        return session

    def close(self, session_id: str) -> dict[str, Any]:
        session = self._drop(session_id)
        if session is None:
            raise SessionError(404, f"session_id: no open session {session_id!r} (closed or expired)")
        with session.lock:
            _close_env(session)
        return {"closed": session_id}

    def _drop(self, session_id: str) -> _Session | None:
        with self.guard:
            session = self.sessions.pop(session_id, None)
            if session is not None:
                self.counts["closed"] += 1
        return session

    def abandon(self, session_id: str, reason: str) -> None:
        """Drop a session whose env call hung; close its env on a side thread (it may hang too)."""
        session = self._drop(session_id)
        self.counts["timed_out"] += 1
        if session is not None:
            threading.Thread(target=_close_env, args=(session,), daemon=True,
                             name=f"turngym-abandon-{session_id[:8]}").start()

    def expire_idle(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        with self.guard:
            idle = [s for s in self.sessions.values()
                    if now - s.last_used > self.limits.idle_timeout_s and not s.lock.locked()]
            for s in idle:
                del self.sessions[s.id]
            self.counts["expired"] += len(idle)
            self.counts["closed"] += len(idle)
        for s in idle:
            with s.lock:
                _close_env(s)
        return len(idle)

    def close_all(self) -> None:
        for session_id in list(self.sessions):
            try:
                self.close(session_id)
            except SessionError:
                pass

    def stats(self) -> dict[str, Any]:
        return {"open_sessions": len(self.sessions), **self.counts, "limits": self.limits.__dict__}

    # ----- the env calls ---------------------------------------------------------------------------
    def reset(self, session_id: str, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise SessionError(400, f"seed: must be an integer >= 0 or null, got {seed!r}")
        if options is not None and not isinstance(options, dict):
            raise SessionError(400, f"options: must be an object or null, got {type(options).__name__}")
        session = self.get(session_id)
        with session.lock:
            try:
                if session.env is None:  # rebuilt after a crash
                    session.env = turngym.make(session.env_id, **session.env_kwargs)
                obs, info = session.env.reset(seed=seed, options=options)
            except ValueError as e:  # bad options: the caller's mistake, the env is fine
                raise SessionError(400, _naming("options", e)) from None
            except ENV_FAILURES:
                self._env_failed(session)
            session.needs_reset, session.over, session.steps = False, None, 0
            return {"observation": obs, "info": info}

    def step(self, session_id: str, action: str, expert: bool = False) -> dict[str, Any]:
        session = self.get(session_id)
        if not isinstance(action, str):
            raise SessionError(400, f"action: must be a string, got {type(action).__name__}")
        if not expert and len(action) > self.limits.max_action_chars:
            raise SessionError(413, f"action: {len(action)} characters, more than max_action_chars="
                                    f"{self.limits.max_action_chars}")
        with session.lock:
            if session.needs_reset:
                raise SessionError(409, "reset needed: call reset before step (or after an env error)")
            if session.over:
                raise SessionError(409, f"episode over: {session.over}; call reset to start a new one")
            try:
                if expert:
                    action = session.env.unwrapped.expert_action()
                obs, reward, terminated, truncated, info = session.env.step(action)
            except NotImplementedError as e:
                raise SessionError(400, f"expert: {e}") from None
            except gym.error.ResetNeeded as e:  # the env itself refuses (turngym.ResetNeeded is one)
                session.over = str(e)
                raise SessionError(409, f"episode over: {e}") from None
            except ENV_FAILURES:
                self._env_failed(session)
            session.steps += 1
            self.counts["steps"] += 1
            if terminated or truncated:
                turn = info.get("turn", session.steps) if isinstance(info, dict) else session.steps
                session.over = f"it ended at turn {turn} ({'terminated' if terminated else 'truncated'})"
            out = {"observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated,
                   "info": info}
            if expert:
                out["action"] = action
            return out

    def describe(self, session_id: str) -> dict[str, Any]:
        session = self.get(session_id)
        with session.lock:
            env = session.env.unwrapped if session.env is not None else None
            live = env is not None and not session.needs_reset

            def ask(name: str, default: Any = None) -> Any:  # every TurnEnv has these; other envs may not
                method = getattr(env, name, None) if live or name == "instructions" else None
                return method() if callable(method) else default

            try:
                return {"session_id": session.id, "env_id": session.env_id, "needs_reset": session.needs_reset,
                        "episode_over": session.over is not None,
                        "turn": getattr(env, "turn", 0) if live else 0,
                        "task_id": (getattr(env, "task", None) or {}).get("task_id") if live else None,
                        "tools": ask("tools"), "admissible_actions": ask("admissible_actions"),
                        "instructions": ask("instructions", "") if env is not None else ""}
            except ENV_FAILURES:
                self._env_failed(session)

    def task_ids(self, session_id: str, split: str | None = None) -> dict[str, Any]:
        session = self.get(session_id)
        with session.lock:
            try:
                if session.env is None:
                    session.env = turngym.make(session.env_id, **session.env_kwargs)
                env = session.env.unwrapped
                return {"split": split or env.split, "task_ids": env.task_ids(split or env.split)}
            except ValueError as e:  # an unknown split: the caller's mistake
                raise SessionError(400, _naming("split", e)) from None
            except ENV_FAILURES:
                self._env_failed(session)

    def _env_failed(self, session: _Session):
        """The env raised: throw it away (rebuilt at the next reset) and say the episode is unscorable."""
        detail = traceback.format_exc(limit=6)
        self.counts["env_errors"] += 1
        _close_env(session)
        session.needs_reset = True
        raise SessionError(500, f"env error (the episode is unscorable): {detail.strip().splitlines()[-1]}",
                           scorable=False)


def _naming(field_name: str, error: Exception) -> str:
    """``error``'s message, starting with the field it is about."""
    message = str(error)
    return message if message.startswith(field_name) else f"{field_name}: {message}"


def _close_env(session: _Session) -> None:
    env, session.env = session.env, None
    session.needs_reset = True
    if env is not None:
        try:
            env.close()
        except ENV_FAILURES:
            pass


# ----- the HTTP layer --------------------------------------------------------------------------------
class TokenGate:
    """ASGI middleware: with a token, every route but /health (HTTP and WebSocket) needs it, as
    ``Authorization: Bearer TOKEN`` or as the path prefix ``/token/TOKEN`` (clients that send no
    headers, such as OpenEnv's, put it in their base URL). The prefix is stripped before routing."""

    def __init__(self, app, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path, given = scope["path"], None
        if path.startswith("/token/"):
            given, _, rest = path[len("/token/"):].partition("/")
            path = "/" + rest
            scope = {**scope, "path": path, "raw_path": path.encode()}
        elif self.token:
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            given = header[len("Bearer "):] if header.startswith("Bearer ") else None
        if not self.token or path == "/health" or (
                given is not None and hmac.compare_digest(given.encode(), self.token.encode())):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":  # refuse the handshake (the client sees HTTP 403)
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        from fastapi.responses import JSONResponse

        response = JSONResponse({"error": "authorization: a valid token is required (header 'Authorization: "
                                          "Bearer TOKEN', or the URL prefix /token/TOKEN)", "scorable": True},
                                status_code=401)
        await response(scope, receive, send)


def create_app(store: SessionStore | None = None, token: str | None = None):
    """A FastAPI app serving ``store``'s sessions (a fresh store with default limits when None),
    with the OpenEnv routes under /openenv/{env_id}."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, Field

    from turngym.integrations import openenv

    store = store or SessionStore()
    limits = store.limits
    workers = EnvWorkers(limits.workers)
    reaper_period = max(0.05, min(limits.idle_timeout_s / 4, 5.0))
    reaper_ran = [time.monotonic()]   # when the idle reaper last finished a pass

    async def call(session_id: str | None, fn, *args) -> Any:
        """Run one env call on the workers under the step timeout. A call past it costs only its
        session (dropped, episode unscorable) and its thread (written off, replaced)."""
        future = workers.submit(fn, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout=limits.step_timeout_s)
        except TimeoutError:
            workers.write_off(future)
            if session_id is not None:
                store.abandon(session_id, "timeout")
            raise SessionError(504, f"step_timeout_s: the env call took more than {limits.step_timeout_s:g} s; "
                                    "the session was closed and its episode is unscorable",
                               scorable=False) from None
        except SessionError:
            raise
        except Exception as e:  # a server bug: still one JSON line, never a dropped connection
            raise SessionError(500, f"server error: {type(e).__name__}: {e}", scorable=False) from None

    async def reaper():
        while True:
            await asyncio.sleep(reaper_period)
            try:
                await call(None, store.expire_idle)
            except SessionError:
                pass  # an env whose close hung: written off; the next pass goes on
            reaper_ran[0] = time.monotonic()

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            closing = threading.Thread(target=store.close_all, daemon=True, name="turngym-close-all")
            closing.start()
            closing.join(timeout=min(limits.step_timeout_s, 10.0))  # an env that hangs in close is left
            workers.shutdown()

    app = FastAPI(title="turngym serve-env", version=turngym.__version__, lifespan=lifespan,
                  description="Sessions of turngym environments: create, reset, step, close.")
    app.state.store = store
    app.state.workers = workers
    app.add_middleware(TokenGate, token=token)

    class CreateRequest(BaseModel):
        env_id: str
        env_kwargs: dict[str, Any] = Field(default_factory=dict)

    class ResetRequest(BaseModel):
        seed: int | None = None
        options: dict[str, Any] | None = None

    class StepRequest(BaseModel):
        action: str

    class BatchOp(BaseModel):
        op: str = Field(description="create | reset | step | expert_step | close | describe")
        session_id: str | None = None
        env_id: str | None = None
        env_kwargs: dict[str, Any] = Field(default_factory=dict)
        seed: int | None = None
        options: dict[str, Any] | None = None
        action: str | None = None

    class BatchRequest(BaseModel):
        ops: list[BatchOp]

    def failure(e: SessionError) -> JSONResponse:
        return JSONResponse({"error": e.message, "scorable": e.scorable}, status_code=e.status)

    async def run_op(op: BatchOp) -> Any:
        kind, sid = op.op, op.session_id
        if kind == "create":
            if not op.env_id:
                raise SessionError(400, "env_id: required for op 'create'")
            return await call(None, store.create, op.env_id, op.env_kwargs)
        if kind not in ("reset", "step", "expert_step", "close", "describe"):
            raise SessionError(400, f"op: {kind!r} is not one of create, reset, step, expert_step, close, describe")
        if not sid:
            raise SessionError(400, f"session_id: required for op {kind!r}")
        if kind == "reset":
            return await call(sid, store.reset, sid, op.seed, op.options)
        if kind == "step":
            if op.action is None:
                raise SessionError(400, "action: required for op 'step'")
            return await call(sid, store.step, sid, op.action)
        if kind == "expert_step":
            return await call(sid, store.step, sid, "", True)
        if kind == "close":
            return await call(sid, store.close, sid)
        return await call(sid, store.describe, sid)

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError):
        return failure(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid request')}", "scorable": True},
                            status_code=400)

    @app.get("/health")
    async def health():
        """200 while the server can serve; 503 naming what is wrong (the idle reaper stalled, or
        more env calls hung than there are workers: threads that cannot be stopped pile up)."""
        status = workers.status()
        problems = []
        since = time.monotonic() - reaper_ran[0]
        if since > 3 * reaper_period + limits.step_timeout_s:
            problems.append(f"the idle reaper has not run for {since:.0f} s")
        if status["hung_env_calls"] > limits.workers:
            problems.append(f"{status['hung_env_calls']} env calls are hung (more than workers={limits.workers}); "
                            "restart the server to free their threads")
        body = {"status": "degraded" if problems else "ok", "problems": problems,
                "open_sessions": len(store.sessions), **status, "reaper_last_run_s": round(since, 3)}
        return JSONResponse(body, status_code=503 if problems else 200)

    @app.get("/envs")
    async def envs():
        ids = sorted(store.env_ids) if store.env_ids is not None else [s.id for s in turngym.list_envs()]
        return {"env_ids": ids}

    @app.get("/stats")
    async def stats():
        return store.stats()

    @app.post("/sessions", status_code=201)
    async def create(req: CreateRequest):
        return await call(None, store.create, req.env_id, req.env_kwargs)

    @app.post("/sessions/{session_id}/reset")
    async def reset(session_id: str, req: ResetRequest):
        return await call(session_id, store.reset, session_id, req.seed, req.options)

    @app.post("/sessions/{session_id}/step")
    async def step(session_id: str, req: StepRequest):
        return await call(session_id, store.step, session_id, req.action)

    @app.post("/sessions/{session_id}/expert_step")
    async def expert_step(session_id: str):
        return await call(session_id, store.step, session_id, "", True)

    @app.get("/sessions/{session_id}")
    async def describe(session_id: str):
        return await call(session_id, store.describe, session_id)

    @app.get("/sessions/{session_id}/task_ids")
    async def task_ids(session_id: str, split: str | None = None):
        return await call(session_id, store.task_ids, session_id, split)

    @app.delete("/sessions/{session_id}")
    async def close(session_id: str):
        return await call(session_id, store.close, session_id)

    @app.post("/batch")
    async def batch(req: BatchRequest):
        """Run many ops in one request. Ops on one session run in the given order; ops on
        different sessions run in parallel. Each result is {"ok": true, "result": ...} or
        {"ok": false, "status", "error", "scorable"}; one failing op never fails the others."""
        results: list[Any] = [None] * len(req.ops)
        chains: dict[Any, list[int]] = {}
        for i, op in enumerate(req.ops):
            chains.setdefault(op.session_id if op.op != "create" else ("create", i), []).append(i)

        async def run_chain(indices: list[int]) -> None:
            for i in indices:
                try:
                    results[i] = {"ok": True, "result": await run_op(req.ops[i])}
                except SessionError as e:
                    results[i] = {"ok": False, "status": e.status, "error": e.message, "scorable": e.scorable}

        await asyncio.gather(*(run_chain(ix) for ix in chains.values()))
        return {"results": results}

    openenv.add_routes(app, store, call)
    return app


# ----- CLI: turngym serve-env ----------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("--env", action="append", dest="envs", metavar="ENV_ID",
                   help="serve only this env id (repeatable; default: every registered env)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--token", help="require 'Authorization: Bearer TOKEN' or the URL prefix /token/TOKEN "
                                   "(default: $TURNGYM_ENV_TOKEN, else none; needed off loopback)")
    p.add_argument("--insecure-no-token", action="store_true",
                   help="allow a --host other than loopback without a token (anyone who reaches the port "
                        "can run envs, and --import'ed code, here)")
    p.add_argument("--max-sessions", type=int, default=1024)
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds one reset/step may take")
    p.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed")
    p.add_argument("--max-action-chars", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=32, help="threads running env calls")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE[:FUNCTION]",
                   help="import a module that registers envs (and call FUNCTION from it), repeatable")
    p.add_argument("--log-level", default="warning", help="uvicorn log level")


def import_registrations(imports: list[str]) -> None:
    """Import ``module`` or call ``module:function`` for each entry (user envs register there)."""
    import importlib

    for entry in imports:
        module, _, function = entry.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args) -> int:
    import os

    import uvicorn

    from turngym.core.commands import CLIError

    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port: {args.port} is not a TCP port (1-65535)")
    try:
        limits = ServerLimits(max_sessions=args.max_sessions, step_timeout_s=args.step_timeout,
                              idle_timeout_s=args.idle_timeout, max_action_chars=args.max_action_chars,
                              workers=args.workers)
    except ValueError as e:
        raise CLIError("--" + str(e).replace("_s:", ":").replace("_", "-")) from None
    try:
        import_registrations(args.imports)
    except (ImportError, AttributeError) as e:
        raise CLIError(f"--import: {e}") from None
    for env_id in args.envs or []:
        try:
            turngym.spec(env_id)
        except ValueError as e:
            raise CLIError(f"--env: {e}") from None
    token = args.token or os.environ.get("TURNGYM_ENV_TOKEN") or None
    if not token and not is_loopback(args.host) and not getattr(args, "insecure_no_token", False):
        raise CLIError(f"--token: --host {args.host} is reachable from other machines; give --token (or "
                       "$TURNGYM_ENV_TOKEN), or pass --insecure-no-token to serve without one")
    app = create_app(SessionStore(limits, env_ids=args.envs), token=token)
    print(f"serving turngym envs at http://{args.host}:{args.port} (schema: /openapi.json; OpenEnv clients: "
          f"http://{args.host}:{args.port}{'/token/TOKEN' if token else ''}/openenv/ENV_ID)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
