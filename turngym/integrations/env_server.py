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

``info`` is the env's StepInfo, as JSON. Env calls run in a thread pool, at most one at a time
per session; different sessions run in parallel. Limits (``ServerLimits``): how many sessions
may be open, how long one env call may take (past it the session is dropped and the answer
says ``scorable: false``: a hung env must not pass for a reward of 0), how long a session may
sit idle before it is closed, and the longest action. A crashing env answers 500 with
``scorable: false`` and is rebuilt at the next reset. With ``token`` set, every route but
/health needs ``Authorization: Bearer TOKEN``.
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.
import asyncio
import hmac
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class _Session:
    id: str
    env_id: str
    env_kwargs: dict[str, Any]
    env: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    needs_reset: bool = True
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
    def create(self, env_id: str, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.env_ids is not None and env_id not in self.env_ids:
            raise SessionError(404, f"env_id: {env_id!r} is not served here; served: {sorted(self.env_ids)}")
        try:
            env_spec = turngym.spec(env_id)
        except ValueError as e:
            raise SessionError(404, f"env_id: {e}") from None
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
        except Exception as e:
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
        session = self.get(session_id)
        with session.lock:
            if session.env is None:  # rebuilt after a crash
                session.env = turngym.make(session.env_id, **session.env_kwargs)
            try:
                obs, info = session.env.reset(seed=seed, options=options)
            except ValueError as e:  # bad options: the caller's mistake, the env is fine
                raise SessionError(400, f"options: {e}") from None
            except Exception:
                self._env_failed(session)
            session.needs_reset, session.steps = False, 0
            return {"observation": obs, "info": info}

    def step(self, session_id: str, action: str, expert: bool = False) -> dict[str, Any]:
        session = self.get(session_id)
        if not expert and len(action) > self.limits.max_action_chars:
            raise SessionError(413, f"action: {len(action)} characters, more than max_action_chars="
                                    f"{self.limits.max_action_chars}")
        with session.lock:
            if session.needs_reset:
                raise SessionError(409, "reset needed: call reset before step (or after an env error)")
            try:
                if expert:
                    action = session.env.unwrapped.expert_action()
                obs, reward, terminated, truncated, info = session.env.step(action)
            except NotImplementedError as e:
                raise SessionError(400, f"expert: {e}") from None
            except Exception:
                self._env_failed(session)
            session.steps += 1
            self.counts["steps"] += 1
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

            return {"session_id": session.id, "env_id": session.env_id, "needs_reset": session.needs_reset,
                    "turn": getattr(env, "turn", 0) if live else 0,
                    "task_id": (getattr(env, "task", None) or {}).get("task_id") if live else None,
                    "tools": ask("tools"), "admissible_actions": ask("admissible_actions"),
                    "instructions": ask("instructions", "") if env is not None else ""}

    def task_ids(self, session_id: str, split: str | None = None) -> dict[str, Any]:
        session = self.get(session_id)
        with session.lock:
            if session.env is None:
                session.env = turngym.make(session.env_id, **session.env_kwargs)
            env = session.env.unwrapped
            return {"split": split or env.split, "task_ids": env.task_ids(split or env.split)}

    def _env_failed(self, session: _Session):
        """The env raised: throw it away (rebuilt at the next reset) and say the episode is unscorable."""
        detail = traceback.format_exc(limit=6)
        self.counts["env_errors"] += 1
        _close_env(session)
        session.needs_reset = True
        raise SessionError(500, f"env error (the episode is unscorable): {detail.strip().splitlines()[-1]}",
                           scorable=False)


def _close_env(session: _Session) -> None:
    env, session.env = session.env, None
    session.needs_reset = True
    if env is not None:
        try:
            env.close()
        except Exception:
            pass


# ----- the HTTP layer --------------------------------------------------------------------------------
def create_app(store: SessionStore | None = None, token: str | None = None):
    """A FastAPI app serving ``store``'s sessions (a fresh store with default limits when None)."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, Field

    store = store or SessionStore()
    limits = store.limits
    executor = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="turngym-env-call")

    async def reaper():
        period = max(0.05, min(limits.idle_timeout_s / 4, 5.0))
        while True:
            await asyncio.sleep(period)
            await asyncio.get_running_loop().run_in_executor(executor, store.expire_idle)

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            store.close_all()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="turngym serve-env", version=turngym.__version__, lifespan=lifespan,
                  description="Sessions of turngym environments: create, reset, step, close.")
    app.state.store = store

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

    async def call(session_id: str | None, fn, *args) -> Any:
        """Run one env call in the pool under the step timeout; a hung call drops its session."""
        future = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
        try:
            return await asyncio.wait_for(future, timeout=limits.step_timeout_s)
        except TimeoutError:
            if session_id is not None:
                store.abandon(session_id, "timeout")
            raise SessionError(504, f"step_timeout_s: the env call took more than {limits.step_timeout_s:g} s; "
                                    "the session was closed and its episode is unscorable",
                               scorable=False) from None

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

    @app.middleware("http")
    async def check_token(request: Request, call_next):
        if token and request.url.path != "/health":
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"error": "authorization: a valid bearer token is required",
                                     "scorable": True}, status_code=401)
        return await call_next(request)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

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

    return app


# ----- CLI: turngym serve-env ----------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("--env", action="append", dest="envs", metavar="ENV_ID",
                   help="serve only this env id (repeatable; default: every registered env)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--token", help="require 'Authorization: Bearer TOKEN' (default: $TURNGYM_ENV_TOKEN, else none)")
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


def run(args) -> int:
    import os

    import uvicorn

    from turngym.cli_common import CLIError

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
    app = create_app(SessionStore(limits, env_ids=args.envs), token=token)
    print(f"serving turngym envs at http://{args.host}:{args.port} (schema: /openapi.json)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
