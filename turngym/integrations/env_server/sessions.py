"""The env server's sessions: limits, the store, and each env call's deadline and failure mapping
(the HTTP layer in ``app`` is thin). Every call is a coroutine on the server's event loop: an env
call in flight waits on its process's pipe and holds no thread."""

import asyncio
import collections
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import turngym
from turngym.core.versions import env_hash
from turngym.integrations.env_server.errors import EnvDied, EnvRaised, EnvTimeout, SessionError, naming
from turngym.integrations.env_server.processes import EnvProcess, close_processes
from turngym.integrations.env_server.shared import Hosts, SharedEnv, declares_shared
from turngym.integrations.env_server.spawner import Spawner
from turngym.integrations.env_server.validate import check_env_kwargs, check_id, check_reset, shown

# Building an env (a process forked, the env made) may take this long even under a shorter step
# timeout: a cold fork server imports turngym first, seconds on a loaded machine, and that is no
# env step. A build that hangs past it is killed like a step.
BUILD_TIMEOUT_S = 60.0


@dataclass
class ServerLimits:
    max_sessions: int = 1024
    step_timeout_s: float = 60.0  # one reset/step/close call
    idle_timeout_s: float = 600.0  # a session untouched this long is closed
    max_action_chars: int = 100_000
    isolate_all: bool = False  # a process per session even for envs that declare shares_process
    max_snapshots: int = 4096  # snapshots kept for clients; past it the oldest is dropped
    max_snapshot_mb: float = 1024.0  # their bytes together; past it too (a count alone lets a client fill memory)

    def __post_init__(self):
        for name in ("max_sessions", "max_action_chars", "max_snapshots"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        for name in ("step_timeout_s", "idle_timeout_s", "max_snapshot_mb"):
            if not getattr(self, name) > 0:  # written so that nan is refused too (nan <= 0 is false)
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)}")


@dataclass
class _Session:
    id: str
    env_id: str
    env_kwargs: dict[str, Any]
    process: EnvProcess | SharedEnv | None = None  # None: no env yet (built at the next reset)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    needs_reset: bool = True
    over: str | None = None  # why the episode ended (a step then answers 409), None while it runs
    steps: int = 0


@dataclass
class KeptSnapshot:
    """A snapshot the server keeps for its clients: they hold its id, never its bytes (a pickle
    from a client would run the client's code here)."""

    env_id: str
    env_kwargs: dict[str, Any]
    snapshot: Any  # turngym.core.snapshot.Snapshot, from the env's own process
    over: str | None
    steps: int


class SessionStore:
    """The sessions of one server (the HTTP layer in ``app`` is thin). Its methods run on one
    event loop, so its dicts and counts need no lock; each session's lock keeps its env calls
    one at a time."""

    def __init__(self, limits: ServerLimits | None = None, env_ids: list[str] | None = None):
        self.limits = limits or ServerLimits()
        self.env_ids = set(env_ids) if env_ids else None  # None: every registered env
        self.sessions: dict[str, _Session] = {}
        self.stuck: list[EnvProcess] = []  # killed, yet alive (in the kernel): counted by /health
        self.running = 0  # env calls in flight
        self.hosts = Hosts()  # the shared host processes (light mode)
        self.spawner = Spawner()  # forks each isolated session's process
        self.snapshots: collections.OrderedDict[str, KeptSnapshot] = collections.OrderedDict()  # oldest first
        self.counts = {"created": 0, "closed": 0, "expired": 0, "timed_out": 0, "env_errors": 0, "steps": 0}

    # ----- lifecycle ---------------------------------------------------------------------------
    def check_env_id(self, env_id: str):
        """The env's spec, or a 404 naming ``env_id`` (unknown, or not served here)."""
        if not isinstance(env_id, str):
            raise SessionError(400, f"env_id: must be a string, got {type(env_id).__name__}")
        check_id("env_id", env_id)
        if self.env_ids is not None and env_id not in self.env_ids:
            raise SessionError(404, f"env_id: {shown(env_id)} is not served here; served: {sorted(self.env_ids)}")
        try:
            return turngym.spec(env_id)
        except ValueError as e:
            raise SessionError(404, f"env_id: {e}") from None

    async def create(
        self, env_id: str, env_kwargs: dict[str, Any] | None = None, snapshot_id: str | None = None
    ) -> dict[str, Any]:
        """A new session; with ``snapshot_id``, in that snapshot's state (its env_kwargs too)."""
        env_spec = self.check_env_id(env_id)
        kept = None
        if snapshot_id is not None:
            kept = self.kept_snapshot(snapshot_id)
            if kept.env_id != env_id:
                raise SessionError(400, f"env_id: {shown(env_id)} is not the snapshot's env, {kept.env_id!r}")
            if env_kwargs and env_kwargs != kept.env_kwargs:
                raise SessionError(400, "env_kwargs: a session from a snapshot takes the snapshot's; send none")
            env_kwargs = kept.env_kwargs
        env_kwargs = check_env_kwargs(env_kwargs if env_kwargs is not None else {})
        if len(self.sessions) >= self.limits.max_sessions:
            raise SessionError(
                429,
                f"max_sessions: {self.limits.max_sessions} sessions are open; "
                "close some or wait for idle ones to expire",
            )
        session = _Session(uuid.uuid4().hex, env_id, dict(env_kwargs or {}))
        self.sessions[session.id] = session
        self.counts["created"] += 1
        async with session.lock:
            await self._build(session, while_doing="building the env")
            out = {
                "session_id": session.id,
                "env_id": env_id,
                "max_episode_steps": env_spec.max_episode_steps,
                "env_hash": env_hash(env_id, **session.env_kwargs),
            }
            if kept is not None:
                out.update(await self._restore(session, kept))
        return out

    async def _restore(self, session: _Session, kept: KeptSnapshot) -> dict[str, Any]:
        """Put a new session's env in ``kept``'s state (the session is closed if that fails)."""
        try:
            obs, info = await self._env_call(session, "restore", kept.snapshot)
        except EnvRaised as e:
            self._drop(session.id)
            await self._close_envs([session])
            raise SessionError(500, f"env error: restoring the snapshot: {e}", scorable=False) from None
        except SessionError:
            self._drop(session.id)
            raise
        session.needs_reset, session.over, session.steps = False, kept.over, kept.steps
        return {"observation": obs, "info": info}

    # ----- snapshots and forks (the env's own snapshot()/restore(); the bytes never leave the server)
    def kept_snapshot(self, snapshot_id: Any) -> KeptSnapshot:
        if not isinstance(snapshot_id, str):
            raise SessionError(400, f"snapshot_id: must be a string, got {type(snapshot_id).__name__}")
        check_id("snapshot_id", snapshot_id)
        kept = self.snapshots.get(snapshot_id)
        if kept is None:
            raise SessionError(
                404,
                f"snapshot_id: no snapshot {shown(snapshot_id)} (deleted, or dropped as the oldest "
                f"past max_snapshots={self.limits.max_snapshots})",
            )
        return kept

    async def _build(self, session: _Session, while_doing: str) -> None:
        """Start the session's env process; a build the env refuses is the caller's env_kwargs."""
        try:
            timeout = max(self.limits.step_timeout_s, BUILD_TIMEOUT_S)
            if not self.limits.isolate_all and declares_shared(session.env_id):
                session.process = await SharedEnv.start(self.hosts, session.env_id, session.env_kwargs, timeout)
            else:
                session.process = await EnvProcess.start(self.spawner, session.env_id, session.env_kwargs, timeout)
        except EnvRaised as e:
            self._drop(session.id)
            raise SessionError(400, f"env_kwargs: cannot build {session.env_id}: {e}") from None
        except EnvTimeout as e:
            self._timed_out(session, while_doing, e.process, max(self.limits.step_timeout_s, BUILD_TIMEOUT_S))
        except EnvDied as e:
            self._drop(session.id)
            self.counts["env_errors"] += 1
            raise SessionError(
                500, f"env error (the episode is unscorable): {e} while {while_doing}", scorable=False
            ) from None
        except Exception as e:  # noqa: BLE001 - e.g. an entry point that cannot be pickled
            self._drop(session.id)
            raise SessionError(
                400, f"env_id: cannot start a process for {session.env_id}: {type(e).__name__}: {e}"
            ) from None

    def get(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionError(404, f"session_id: no open session {shown(str(session_id))} (closed or expired)")
        session.last_used = time.monotonic()
        return session

    @contextlib.asynccontextmanager
    async def _held(self, session: _Session):
        """The session's lock: one env call at a time per session; a second waits its turn, up to
        the step timeout (409 past it)."""
        try:
            await asyncio.wait_for(session.lock.acquire(), self.limits.step_timeout_s)
        except TimeoutError:
            raise SessionError(
                409, f"session_id: {session.id!r} is busy with another call; send one at a time"
            ) from None
        try:
            yield
        finally:
            session.lock.release()

    async def close(self, session_id: str) -> dict[str, Any]:
        session = self._drop(session_id)
        if session is None:
            raise SessionError(404, f"session_id: no open session {session_id!r} (closed or expired)")
        async with self._held(session):
            await self._close_envs([session])
        return {"closed": session_id}

    def _drop(self, session_id: str) -> _Session | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.counts["closed"] += 1
        return session

    async def expire_idle(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        idle = [
            s for s in self.sessions.values() if now - s.last_used > self.limits.idle_timeout_s and not s.lock.locked()
        ]
        for s in idle:
            del self.sessions[s.id]
        self.counts["expired"] += len(idle)
        self.counts["closed"] += len(idle)
        await self._close_envs(idle)
        return len(idle)

    async def close_all(self) -> None:
        sessions = list(self.sessions.values())
        self.sessions.clear()
        self.counts["closed"] += len(sessions)
        await self._close_envs(sessions)
        self.hosts.close()
        self.spawner.close()

    async def _close_envs(self, sessions: list[_Session]) -> None:
        processes = [s.process for s in sessions if s.process is not None]
        for s in sessions:
            s.process, s.needs_reset = None, True
        # an env whose close hangs is killed after this
        self.stuck.extend(await close_processes(processes, min(self.limits.step_timeout_s, 5.0)))

    def stats(self) -> dict[str, Any]:
        return {
            "open_sessions": len(self.sessions),
            **self.counts,
            "env_processes": self.live_processes(),
            "limits": self.limits.__dict__,
        }

    def live_processes(self) -> int:
        return sum(1 for s in list(self.sessions.values()) if s.process is not None and s.process.alive())

    def stuck_processes(self) -> int:
        """Env processes that outlived SIGKILL (blocked in the kernel); they hold memory only."""
        self.stuck = [p for p in self.stuck if p.alive()]
        return len(self.stuck)

    # ----- the env calls ---------------------------------------------------------------------------
    def _deadline(self, timeout_s: float | None) -> float:
        """An env call's deadline: the caller's own (``timeout_s``), never past the server's."""
        if timeout_s is None:
            return self.limits.step_timeout_s
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise SessionError(400, f"timeout_s: must be a number > 0 or null, got {timeout_s!r}")
        return min(float(timeout_s), self.limits.step_timeout_s)

    async def _env_call(self, session: _Session, name: str, *args, timeout_s: float | None = None) -> Any:
        """One call into the session's env under its deadline. A hang kills the process and
        closes the session (504); an env that raised or exited is thrown away (500). Both say the
        episode is unscorable. EnvRaised of a kind the caller can own is passed on."""
        deadline = self._deadline(timeout_s)
        self.running += 1
        try:
            return await session.process.call(name, *args, timeout=deadline)
        except EnvTimeout as e:
            self._timed_out(session, name, e.process, deadline)
        except EnvDied as e:
            await self._env_failed(session, str(e))
        except EnvRaised as e:
            if e.kind == "error":
                await self._env_failed(session, str(e))
            raise
        except asyncio.CancelledError:
            # the request was abandoned mid-call: its answer would reach the next call, so this
            # env goes (rebuilt at the next reset)
            process, session.process, session.needs_reset = session.process, None, True
            if process is not None:
                process.stop()
                asyncio.ensure_future(close_processes([process], 0.0))
            raise
        finally:
            self.running -= 1

    def _timed_out(self, session: _Session, doing: str, process: EnvProcess, deadline: float | None = None):
        if process.alive():  # killed a second ago, yet not gone
            self.stuck.append(process)
        session.process, session.needs_reset = None, True
        self._drop(session.id)
        self.counts["timed_out"] += 1
        deadline = self.limits.step_timeout_s if deadline is None else deadline
        raise SessionError(
            504,
            f"step_timeout_s: the env's {doing} took more than {deadline:g} s; "
            "its process was killed, the session closed, and its episode is unscorable",
            scorable=False,
        )

    async def _env_failed(self, session: _Session, detail: str):
        """The env raised or its process died: throw it away (rebuilt at the next reset) and say
        the episode is unscorable."""
        self.counts["env_errors"] += 1
        await self._close_envs([session])
        raise SessionError(500, f"env error (the episode is unscorable): {detail}", scorable=False)

    async def reset(
        self,
        session_id: str,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ):
        check_reset(seed, options)
        session = self.get(session_id)
        async with self._held(session):
            if session.process is None:  # rebuilt after a crash
                await self._build(session, while_doing="rebuilding the env")
            try:
                obs, info = await self._env_call(session, "reset", seed, options, timeout_s=timeout_s)
            except EnvRaised as e:
                if e.kind == "value":  # bad options: the caller's mistake; the env is fine
                    raise SessionError(400, naming("options", e.message)) from None
                await self._env_failed(session, str(e))
            session.needs_reset, session.over, session.steps = False, None, 0
            return {"observation": obs, "info": info}

    async def step(
        self, session_id: str, action: str, expert: bool = False, timeout_s: float | None = None
    ) -> dict[str, Any]:
        session = self.get(session_id)
        if not isinstance(action, str):
            raise SessionError(400, f"action: must be a string, got {type(action).__name__}")
        if not expert and len(action) > self.limits.max_action_chars:
            raise SessionError(
                413,
                f"action: {len(action)} characters, more than max_action_chars={self.limits.max_action_chars}",
            )
        async with self._held(session):
            if session.needs_reset:
                raise SessionError(409, "reset needed: call reset before step (or after an env error)")
            if session.over:
                raise SessionError(409, f"episode over: {session.over}; call reset to start a new one")
            try:
                action, obs, reward, terminated, truncated, info = await self._env_call(
                    session, "step", action, expert, timeout_s=timeout_s
                )
            except EnvRaised as e:
                if e.kind == "reset_needed":  # the env itself refuses
                    session.over = e.message
                    raise SessionError(409, f"episode over: {e.message}") from None
                if e.kind == "not_implemented":
                    raise SessionError(400, f"expert: {e.message}") from None
                await self._env_failed(session, str(e))  # raised in step (a ValueError too): the env's fault
            session.steps += 1
            self.counts["steps"] += 1
            if terminated or truncated:
                turn = info.get("turn", session.steps) if isinstance(info, dict) else session.steps
                session.over = f"it ended at turn {turn} ({'terminated' if terminated else 'truncated'})"
        out = {
            "observation": obs,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "info": info,
        }
        if expert:
            out["action"] = action
        return out

    async def describe(self, session_id: str) -> dict[str, Any]:
        session = self.get(session_id)
        async with self._held(session):
            head = {
                "session_id": session.id,
                "env_id": session.env_id,
                "needs_reset": session.needs_reset,
                "episode_over": session.over is not None,
            }
            if session.process is None:
                return {
                    **head,
                    "turn": 0,
                    "task_id": None,
                    "tools": None,
                    "admissible_actions": None,
                    "instructions": "",
                }
            try:
                return {**head, **await self._env_call(session, "describe", not session.needs_reset)}
            except EnvRaised as e:
                await self._env_failed(session, str(e))

    async def task_ids(self, session_id: str, split: str | None = None) -> dict[str, Any]:
        session = self.get(session_id)
        async with self._held(session):
            if session.process is None:
                await self._build(session, while_doing="rebuilding the env")
            try:
                return await self._env_call(session, "task_ids", split)
            except EnvRaised as e:  # an unknown split (a ValueError): the caller's mistake
                if e.kind == "value":
                    raise SessionError(400, naming("split", e.message)) from None
                await self._env_failed(session, str(e))
