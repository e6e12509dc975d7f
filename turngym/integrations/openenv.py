"""OpenEnv's protocol on ``turngym serve-env``: every registered env at ``/openenv/{env_id}``.

OpenEnv clients (``openenv-core``: TRL, SkyRL, Unsloth and verifiers consume it) take a base URL
and no env id, so each env gets its own base URL on the one server::

    turngym serve-env --port 8100

    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8100/openenv/turngym/Household-v0").sync() as env:
        result = env.reset(seed=0, task_id="...")
        result = env.step({"action": "go to fridge 1"})

Routes under that base URL, as an OpenEnv server has them:

- ``/ws``: one WebSocket is one session (one env). Messages ``{"type": "reset", "data": {...}}``,
  ``{"type": "step", "data": {"action": "..."}}``, ``{"type": "state"}``, ``{"type": "close"}``.
  ``reset`` takes ``seed`` and ``episode_id`` (OpenEnv's) and turngym's ``task_id``, ``split``,
  ``task``, ``max_turns``. Forks (envs with snapshots): ``{"type": "snapshot"}`` answers
  ``{"type": "snapshot", "data": {"snapshot_id", ...}}`` (the state stays on the server), and a
  reset whose data is ``{"snapshot_id": ...}`` continues that state on any socket of the env.
- ``/schema``, ``/metadata``, ``/health``, ``/state``; ``/reset`` (a throwaway env, as OpenEnv's
  HTTP reset is); ``/step`` answers 409, since a stateless HTTP step has no episode to act in.

An answer is ``{"observation": {"text", "info", "terminated", "truncated", "scorable"}, "reward",
"done"}``; ``info`` is the env's StepInfo. The server's limits hold as for its own sessions. An
env that crashes or runs past the step timeout ends the episode: ``done`` true, ``truncated``
true, ``scorable`` false, ``info.done_reason`` "error" or "timeout", and ``error`` says what
happened (never a silent reward of 0). The caller's mistakes (an unknown field, a step after the
episode ended) answer an OpenEnv error message naming the field. With a token, the base URL
carries it: ``http://HOST:8100/token/TOKEN/openenv/ENV_ID`` (OpenEnv clients send no headers).
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.
import asyncio
import contextlib
import json
from typing import Any

import turngym
from turngym.integrations.env_server.errors import SessionError

PREFIX = "/openenv/{env_id:path}"
RESET_FIELDS = ("seed", "episode_id", "task_id", "split", "task", "max_turns", "snapshot_id")
STEP_FIELDS = ("action", "metadata")  # metadata: OpenEnv's Action base class always has it

ACTION_SCHEMA = {
    "title": "TurngymAction",
    "type": "object",
    "required": ["action"],
    "additionalProperties": False,
    "properties": {
        "action": {
            "type": "string",
            "description": "the agent's reply: a command, or a tool call (<tool_call>{...}</tool_call>) in tools mode",
        },
        "metadata": {"type": "object", "description": "ignored"},
    },
}
OBSERVATION_SCHEMA = {
    "title": "TurngymObservation",
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "what the agent sees this turn"},
        "info": {
            "type": "object",
            "description": "turngym's StepInfo (turn, task_id, state_key, tools, ...)",
        },
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "scorable": {
            "type": "boolean",
            "description": "false: the server failed this episode (crash or "
            "timeout); leave it out of training and scores",
        },
        "error": {"type": "string", "description": "why the episode is unscorable (only then)"},
    },
}
STATE_SCHEMA = {
    "title": "TurngymState",
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer"},
        "env_id": {"type": "string"},
        "task_id": {"type": ["string", "null"]},
        "done": {"type": "boolean"},
        "scorable": {"type": "boolean"},
    },
}


def add_routes(app, store, call) -> None:
    """Add the OpenEnv routes to a serve-env ``app``; ``call`` runs env calls under the limits."""
    from fastapi import Request, WebSocket
    from fastapi.responses import JSONResponse

    def refuse(e: SessionError) -> JSONResponse:
        return JSONResponse({"error": e.message, "scorable": e.scorable}, status_code=e.status)

    @app.get(PREFIX + "/health", tags=["OpenEnv"])
    async def health(env_id: str):
        try:
            store.check_env_id(env_id)
        except SessionError as e:
            return refuse(e)
        return {"status": "healthy"}

    @app.get(PREFIX + "/metadata", tags=["OpenEnv"])
    async def metadata(env_id: str):
        try:
            store.check_env_id(env_id)
        except SessionError as e:
            return refuse(e)
        from turngym.core.registry import tags

        return {
            "name": env_id,
            "description": tags(env_id).description or f"turngym env {env_id}",
            "version": turngym.__version__,
            "author": "turngym",
            "readme_content": None,
            "documentation_url": None,
        }

    @app.get(PREFIX + "/schema", tags=["OpenEnv"])
    async def schema(env_id: str):
        try:
            store.check_env_id(env_id)
        except SessionError as e:
            return refuse(e)
        return {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}

    @app.get(PREFIX + "/state", tags=["OpenEnv"])
    async def state(env_id: str):
        try:
            store.check_env_id(env_id)
        except SessionError as e:
            return refuse(e)
        return {
            "episode_id": None,
            "step_count": 0,
            "env_id": env_id,
            "task_id": None,
            "done": False,
            "scorable": True,
        }

    @app.post(PREFIX + "/reset", tags=["OpenEnv"])
    async def reset(env_id: str, request: Request):
        """A throwaway env's first observation (OpenEnv's HTTP reset keeps no session either)."""
        try:
            body = await _json_body(request)
            seed, options = reset_arguments(body)
            out = await call(store.create, env_id, {}, body.get("snapshot_id"))
            sid = out["session_id"]
            try:
                if "observation" not in out:  # a snapshot's session is there already
                    out = await call(store.reset, sid, seed, options)
            finally:
                if sid in store.sessions:
                    await call(store.close, sid)
        except SessionError as e:
            return refuse(e)
        return answer(out["observation"], None, False, False, out["info"])

    @app.post(PREFIX + "/step", tags=["OpenEnv"])
    async def step(env_id: str):
        return refuse(
            SessionError(
                409,
                "step over HTTP has no episode to act in (each OpenEnv HTTP call gets a "
                "fresh env): use the WebSocket session at /ws, as OpenEnv's EnvClient does",
            )
        )

    @app.websocket(PREFIX + "/ws")
    async def session(websocket: WebSocket, env_id: str):
        await serve_socket(websocket, env_id, store, call)


async def serve_socket(websocket, env_id: str, store, call) -> None:
    """One WebSocket, one session: each message answered in order. A message the server cannot
    handle gets an error message; a server fault closes the socket with a close frame (1011)."""
    from fastapi import WebSocketDisconnect

    await websocket.accept()
    episode = _Episode(env_id)
    try:
        while True:
            message = _parsed(await websocket.receive_text())
            if isinstance(message, dict) and message.get("type") == "close":
                break
            await websocket.send_json(await _reply(episode, store, call, message))
    except WebSocketDisconnect:
        pass
    except Exception as e:  # noqa: BLE001 - a server fault: say so in the close frame, never just drop
        with contextlib.suppress(Exception):
            await websocket.close(code=1011, reason=f"server error: {type(e).__name__}"[:120])
    finally:
        if episode.session_id in store.sessions:  # shielded: a cancelled handler still frees it
            closing = asyncio.ensure_future(call(store.close, episode.session_id))
            try:
                await asyncio.shield(closing)
            except (SessionError, asyncio.CancelledError):
                pass


def _parsed(raw: str) -> Any:
    """A message as JSON, or the SessionError that says why it is not."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        return SessionError(400, f"message: not JSON ({e})")
    except RecursionError:
        return SessionError(400, "message: JSON nested too deep")


async def _reply(episode: "_Episode", store, call, message: Any) -> dict[str, Any]:
    if isinstance(message, SessionError):
        return error("INVALID_JSON", message.message)
    kind = message.get("type") if isinstance(message, dict) else None
    data = (message.get("data") or {}) if isinstance(message, dict) else {}
    try:
        if not isinstance(data, dict):
            raise SessionError(400, f"data: must be an object, got {type(data).__name__}")
        if kind == "reset":
            return await episode.reset(store, call, data)
        if kind == "step":
            return await episode.step(store, call, data)
        if kind == "state":
            return {"type": "state", "data": episode.state()}
        if kind == "snapshot":
            return await episode.snapshot(store, call)
        return error("UNKNOWN_TYPE", f"type: {str(kind)[:40]!r} is not one of reset, step, state, snapshot, close")
    except SessionError as e:
        return error(_code(e), e.message, scorable=e.scorable)


class _Episode:
    """One WebSocket's session: opened at the first reset, reopened after the server lost it."""

    def __init__(self, env_id: str):
        self.env_id = env_id
        self.session_id: str | None = None
        self.info: dict[str, Any] = {}
        self.steps = 0
        self.done = False
        self.scorable = True

    async def reset(self, store, call, data: dict[str, Any]) -> dict[str, Any]:
        seed, options = reset_arguments(data)
        if data.get("snapshot_id") is not None:
            return await self.restore(store, call, data)
        if self.session_id is None or self.session_id not in store.sessions:  # first, or expired / timed out
            self.session_id = (await call(store.create, self.env_id, {}))["session_id"]
        try:
            out = await call(store.reset, self.session_id, seed, options)
        except SessionError as e:
            if e.status >= 500:
                self.session_id = None if e.status == 504 else self.session_id
            raise
        self.info, self.steps, self.done, self.scorable = out["info"], 0, False, True
        return {"type": "observation", "data": answer(out["observation"], None, False, False, out["info"])}

    async def restore(self, store, call, data: dict[str, Any]) -> dict[str, Any]:
        """This socket's episode goes on from a kept snapshot: its session is replaced by one made
        in the snapshot's state (a fork: another socket's snapshot, restored here)."""
        others = sorted(k for k in data if k != "snapshot_id" and data[k] is not None)
        if others:
            raise SessionError(400, f"{others[0]}: a reset from snapshot_id takes no other field")
        out = await call(store.create, self.env_id, {}, data["snapshot_id"])
        if self.session_id in store.sessions:
            await call(store.close, self.session_id)
        self.session_id = out["session_id"]
        self.info, self.steps, self.scorable = out["info"], out["info"].get("turn", 0), True
        self.done = False
        return {"type": "observation", "data": answer(out["observation"], None, False, False, out["info"])}

    async def snapshot(self, store, call) -> dict[str, Any]:
        if self.session_id is None:
            raise SessionError(409, "reset needed: send reset before snapshot")
        from turngym.integrations.env_server import forks

        return {"type": "snapshot", "data": await call(forks.snapshot, store, self.session_id)}

    async def step(self, store, call, data: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(data) - set(STEP_FIELDS))
        if unknown:
            raise SessionError(400, f"{unknown[0]}: not an action field; allowed: action (a string)")
        action = data.get("action")
        if not isinstance(action, str):
            raise SessionError(400, f"action: required, a string (got {type(action).__name__})")
        if self.session_id is None:
            raise SessionError(409, "reset needed: send reset before step")
        try:
            out = await call(store.step, self.session_id, action)
        except SessionError as e:
            if e.status == 413:  # too long: an invalid action, nothing changed
                return {"type": "observation", "data": self._invalid(e.message)}
            if e.status in (404, 500, 504):  # the server lost the episode: end it, unscorable
                return {"type": "observation", "data": self._lost(e)}
            raise
        self.info, self.steps = out["info"], self.steps + 1
        self.done = bool(out["terminated"] or out["truncated"])
        self.scorable = bool(out["info"].get("scorable", True)) if isinstance(out["info"], dict) else True
        return {
            "type": "observation",
            "data": answer(out["observation"], out["reward"], out["terminated"], out["truncated"], out["info"]),
        }

    def _invalid(self, message: str) -> dict[str, Any]:
        info = {
            **self.info,
            "action_valid": False,
            "parse_error": message,
            "messages": [{"role": "user", "content": message}],
            "reward_components": {"reward": 0.0},
        }
        return answer(message, 0.0, False, False, info)

    def _lost(self, e) -> dict[str, Any]:
        from turngym.core.env import StepInfo

        if e.status in (404, 504):
            self.session_id = None  # gone on the server; the next reset opens a new session
        text = f"The environment server failed: {e.message}"
        info = {
            **StepInfo().to_dict(),
            "task_id": self.info.get("task_id", ""),
            "episode_id": self.info.get("episode_id", ""),
            "turn": self.info.get("turn", 0),
            "scorable": False,
            "done_reason": "timeout" if e.status == 504 else "error",
            "messages": [{"role": "user", "content": text}],
            "reward_components": {"reward": 0.0},
        }
        self.done, self.scorable = True, False
        out = answer(text, 0.0, False, True, info)
        out["observation"]["error"] = e.message
        return out

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.info.get("episode_id"),
            "step_count": self.steps,
            "env_id": self.env_id,
            "task_id": self.info.get("task_id"),
            "done": self.done,
            "scorable": self.scorable,
        }


def reset_arguments(data: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
    """OpenEnv reset fields -> (seed, turngym reset options); an unknown field is the caller's mistake."""
    unknown = sorted(set(data) - set(RESET_FIELDS))
    if unknown:
        raise SessionError(400, f"{unknown[0][:60]}: not a reset field; allowed: {', '.join(RESET_FIELDS)}")
    options = {k: data[k] for k in ("task_id", "split", "task", "max_turns") if data.get(k) is not None}
    return data.get("seed"), options or None


def answer(text: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]) -> dict:
    """One env answer in OpenEnv's shape (observation fields, reward, done)."""
    scorable = bool(info.get("scorable", True)) if isinstance(info, dict) else True
    return {
        "observation": {
            "text": text,
            "info": info,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "scorable": scorable,
        },
        "reward": None if reward is None else float(reward),
        "done": bool(terminated or truncated),
    }


def error(code: str, message: str, scorable: bool = True) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, "scorable": scorable}}


def _code(e) -> str:
    """An OpenEnv error code for a refused call."""
    if e.status == 429:
        return "CAPACITY_REACHED"
    if e.status == 409:
        return "RESET_NEEDED"
    if e.status == 404:
        return "FACTORY_ERROR"  # an unknown env id: the session could not be built
    if e.status < 500:
        return "VALIDATION_ERROR"
    return "EXECUTION_ERROR"


async def _json_body(request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":  # text/plain is what a web page may send cross-site without asking
        raise SessionError(415, f"content-type: {kind[:60]!r} is not application/json")
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SessionError(400, f"body: not JSON ({e})") from None
    except RecursionError:
        raise SessionError(400, "body: JSON nested too deep") from None
    if not isinstance(body, dict):
        raise SessionError(400, f"body: must be an object, got {type(body).__name__}")
    return body
