"""The env server's snapshots and forks: an env's own ``snapshot()``/``restore()`` behind the
session routes. The state stays on the server (a client holds a ``snapshot_id``, never the
bytes: unpickling a client's bytes would run the client's code here)."""

import uuid
from typing import Any

from turngym.integrations.env_server.errors import EnvRaised, SessionError
from turngym.integrations.env_server.sessions import KeptSnapshot, SessionStore


async def _take(store: SessionStore, session_id: str, timeout_s: float | None = None) -> KeptSnapshot:
    session = store.get(session_id)
    from turngym.core.registry import snapshots_supported

    if not snapshots_supported(session.env_id):
        raise SessionError(
            400,
            f"snapshot: {session.env_id} does not support snapshots (metadata['snapshots'] is false; "
            "`turngym list` shows which envs do)",
        )
    async with store._held(session):
        if session.needs_reset:
            raise SessionError(409, "reset needed: a session has no state to snapshot before reset")
        try:
            snapshot = await store._env_call(session, "snapshot", timeout_s=timeout_s)
        except EnvRaised as e:
            if e.kind == "not_implemented":
                raise SessionError(400, f"snapshot: {e.message}") from None
            await store._env_failed(session, str(e))
        return KeptSnapshot(session.env_id, session.env_kwargs, snapshot, session.over, session.steps)


async def snapshot(store: SessionStore, session_id: str, timeout_s: float | None = None) -> dict[str, Any]:
    """Keep the session's state here; the answer names it (``snapshot_id``)."""
    kept = await _take(store, session_id, timeout_s)
    limit = store.limits.max_snapshot_mb * 2**20
    if kept.snapshot.nbytes > limit:
        raise SessionError(
            413,
            f"snapshot: {kept.snapshot.nbytes:,} bytes, more than the server keeps "
            f"(max_snapshot_mb={store.limits.max_snapshot_mb:g})",
        )
    snapshot_id = uuid.uuid4().hex
    store.snapshots[snapshot_id] = kept
    kept_bytes = sum(k.snapshot.nbytes for k in store.snapshots.values())
    while len(store.snapshots) > store.limits.max_snapshots or kept_bytes > limit:
        _, dropped = store.snapshots.popitem(last=False)  # the oldest first
        kept_bytes -= dropped.snapshot.nbytes
    return {
        "snapshot_id": snapshot_id,
        "env_id": kept.env_id,
        "turn": kept.snapshot.turn,
        "nbytes": kept.snapshot.nbytes,
    }


async def fork(store: SessionStore, session_id: str, timeout_s: float | None = None) -> dict[str, Any]:
    """A new session in the state this one is in now (the same env_kwargs, turn and episode)."""
    kept = await _take(store, session_id, timeout_s)
    snapshot_id = uuid.uuid4().hex  # kept only while the new session is made
    store.snapshots[snapshot_id] = kept
    try:
        return await store.create(kept.env_id, None, snapshot_id)
    finally:
        store.snapshots.pop(snapshot_id, None)


def delete_snapshot(store: SessionStore, snapshot_id: str) -> dict[str, Any]:
    store.kept_snapshot(snapshot_id)
    del store.snapshots[snapshot_id]
    return {"deleted": snapshot_id}
