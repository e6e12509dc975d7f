"""The env server's FastAPI app: its routes over a ``SessionStore``, and the OpenEnv routes."""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.
import asyncio
import json
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

import turngym
from turngym.core.http_guard import Guard
from turngym.integrations import openenv
from turngym.integrations.env_server import forks
from turngym.integrations.env_server.errors import SessionError
from turngym.integrations.env_server.middleware import TokenGate
from turngym.integrations.env_server.models import (
    BatchOp,
    BatchRequest,
    CreateRequest,
    ResetRequest,
    StepRequest,
)
from turngym.integrations.env_server.sessions import SessionStore


def failure(e: SessionError) -> JSONResponse:
    return JSONResponse({"error": e.message, "scorable": e.scorable}, status_code=e.status)


def refuse(status: int, message: str) -> JSONResponse:
    """A request refused before any route (token, Host / Origin, body caps): the same one line."""
    return JSONResponse({"error": message, "scorable": True}, status_code=status)


def answer(content: Any):
    """An env call's answer as JSON. Observations and infos are plain JSON values, which
    json.dumps writes at C speed; FastAPI's own path walks them in Python first
    (jsonable_encoder: a fifth of the event loop's time in a remote-pool run). Anything
    json.dumps refuses takes that path, as before."""
    try:
        body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return JSONResponse(jsonable_encoder(content))
    return Response(body.encode("utf-8"), media_type="application/json")


def op_failure(e: SessionError) -> dict[str, Any]:
    """A batch op's result when it failed (the batch itself still answers 200)."""
    return {"ok": False, "status": e.status, "error": e.message, "scorable": e.scorable}


def create_app(store: SessionStore | None = None, token: str | None = None, local_only: bool | None = None):
    """A FastAPI app serving ``store``'s sessions (a fresh store with default limits when None),
    with the OpenEnv routes under /openenv/{env_id}. ``local_only`` (default: when there is no
    token) answers only requests whose Host is this machine and whose Origin, if any, is too."""
    store = store or SessionStore()
    limits = store.limits
    reaper_period = max(0.05, min(limits.idle_timeout_s / 4, 5.0))
    reaper_ran = [time.monotonic()]  # when the idle reaper last finished a pass

    async def call(fn, *args) -> Any:
        """Await one store call. It cannot outlive the step timeout by much: the env runs in its
        own process, killed at the deadline (the store answers 504 then)."""
        try:
            return await fn(*args)
        except SessionError:
            raise
        except Exception as e:  # a server bug: still one JSON line, never a dropped connection
            raise SessionError(500, f"server error: {type(e).__name__}: {e}", scorable=False) from None

    async def reaper():
        while True:
            await asyncio.sleep(reaper_period)
            try:
                await store.expire_idle()
            except Exception:  # noqa: BLE001 - the next pass goes on
                pass
            reaper_ran[0] = time.monotonic()

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await store.close_all()  # bounded: a few seconds to close, then killed

    app = FastAPI(
        title="turngym serve-env",
        version=turngym.__version__,
        lifespan=lifespan,
        description="Sessions of turngym environments: create, reset, step, close.",
    )
    app.state.store = store
    app.add_middleware(TokenGate, token=token, refuse=refuse)
    app.add_middleware(Guard, refuse=refuse, local_only=token is None if local_only is None else local_only)
    add_error_handlers(app)

    @app.get("/health")
    async def health():
        """200 while the server serves; 503 naming what is wrong (the idle reaper stalled).
        Always counted: live env processes, env calls in flight, and env processes that outlived
        SIGKILL (stuck in the kernel: they hold memory only)."""
        since = time.monotonic() - reaper_ran[0]
        problems = (
            [f"the idle reaper has not run for {since:.0f} s"]
            if since > 3 * reaper_period + limits.step_timeout_s
            else []
        )
        body = {
            "status": "degraded" if problems else "ok",
            "problems": problems,
            "open_sessions": len(store.sessions),
            "env_processes": store.live_processes(),
            "stuck_env_processes": store.stuck_processes(),
            "running_env_calls": store.running,
            "timed_out": store.counts["timed_out"],
            "env_errors": store.counts["env_errors"],
            "reaper_last_run_s": round(since, 3),
        }
        return JSONResponse(body, status_code=503 if problems else 200)

    add_session_routes(app, store, call)
    add_batch_route(app, store, call)
    openenv.add_routes(app, store, call)
    return app


def add_error_handlers(app) -> None:
    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError):
        return failure(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return refuse(400, f"body: not JSON ({first.get('ctx', {}).get('error', 'invalid')})")
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "body"
        return refuse(400, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        # FastAPI's own refusals (a body it cannot parse, JSON nested past the recursion limit
        # included; an unknown route): the same one line
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        message = "body: cannot be parsed (not JSON, or nested too deep)" if "parsing the body" in detail else detail
        return refuse(exc.status_code, message)


def add_session_routes(app, store: SessionStore, call) -> None:
    """/envs, /stats and /sessions/...: one route per store call."""

    @app.get("/envs")
    async def envs():
        ids = sorted(store.env_ids) if store.env_ids is not None else [s.id for s in turngym.list_envs()]
        return {"env_ids": ids}

    @app.get("/stats")
    async def stats():
        return store.stats()

    @app.post("/sessions", status_code=201)
    async def create(req: CreateRequest):
        """A new session; with ``snapshot_id``, in that kept snapshot's state (answer with its
        observation and info, no reset needed)."""
        return await call(store.create, req.env_id, req.env_kwargs, req.snapshot_id)

    @app.post("/sessions/{session_id}/reset")
    async def reset(session_id: str, req: ResetRequest):
        return answer(await call(store.reset, session_id, req.seed, req.options))

    @app.post("/sessions/{session_id}/step")
    async def step(session_id: str, req: StepRequest):
        return answer(await call(store.step, session_id, req.action))

    @app.post("/sessions/{session_id}/expert_step")
    async def expert_step(session_id: str):
        return answer(await call(store.step, session_id, "", True))

    @app.post("/sessions/{session_id}/snapshot")
    async def snapshot(session_id: str):
        """Keep the session's state on the server; the answer's ``snapshot_id`` opens sessions in it."""
        return await call(forks.snapshot, store, session_id)

    @app.post("/sessions/{session_id}/fork", status_code=201)
    async def fork(session_id: str):
        """A new session in the state this one is in now (counts against max_sessions)."""
        return await call(forks.fork, store, session_id)

    @app.delete("/snapshots/{snapshot_id}")
    async def delete_snapshot(snapshot_id: str):
        return forks.delete_snapshot(store, snapshot_id)

    @app.get("/sessions/{session_id}")
    async def describe(session_id: str):
        return await call(store.describe, session_id)

    @app.get("/sessions/{session_id}/task_ids")
    async def task_ids(session_id: str, split: str | None = None):
        return await call(store.task_ids, session_id, split)

    @app.delete("/sessions/{session_id}")
    async def close(session_id: str):
        return await call(store.close, session_id)


OPS = ("reset", "step", "expert_step", "close", "describe", "snapshot", "fork")  # on a session


async def run_op(store: SessionStore, call, op: BatchOp) -> Any:
    """One /batch op through ``call``."""
    kind, sid = op.op, op.session_id
    if kind == "create":
        if not op.env_id:
            raise SessionError(400, "env_id: required for op 'create'")
        return await call(store.create, op.env_id, op.env_kwargs, op.snapshot_id)
    if kind not in OPS:
        raise SessionError(400, f"op: {kind!r} is not one of create, {', '.join(OPS)}")
    if not sid:
        raise SessionError(400, f"session_id: required for op {kind!r}")
    if kind == "reset":
        return await call(store.reset, sid, op.seed, op.options, op.timeout_s)
    if kind == "step":
        if op.action is None:
            raise SessionError(400, "action: required for op 'step'")
        return await call(store.step, sid, op.action, False, op.timeout_s)
    if kind == "expert_step":
        return await call(store.step, sid, "", True, op.timeout_s)
    if kind == "close":
        return await call(store.close, sid)
    if kind in ("snapshot", "fork"):
        return await call(getattr(forks, kind), store, sid, op.timeout_s)
    return await call(store.describe, sid)


def add_batch_route(app, store: SessionStore, call) -> None:
    @app.post("/batch")
    async def batch(req: BatchRequest):
        """Run many ops in one request. Ops on one session run in the given order; ops on
        different sessions run at once (each waits on its own env). Each result is {"ok": true,
        "result": ...} or {"ok": false, "status", "error", "scorable"}; one failing op never
        fails the others."""
        results: list[Any] = [None] * len(req.ops)
        chains: dict[Any, list[int]] = {}
        for i, op in enumerate(req.ops):
            chains.setdefault(op.session_id if op.op != "create" else ("create", i), []).append(i)

        async def run_chain(indices: list[int]) -> None:
            for i in indices:
                try:
                    results[i] = {"ok": True, "result": await run_op(store, call, req.ops[i])}
                except SessionError as e:
                    results[i] = op_failure(e)

        await asyncio.gather(*(run_chain(ix) for ix in chains.values()))
        return answer({"results": results})
