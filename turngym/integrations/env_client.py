"""Clients of ``turngym serve-env``: ``EnvClient`` (the HTTP calls) and ``RemoteEnv`` (a Gymnasium env).

    from turngym.integrations.env_client import RemoteEnv

    env = RemoteEnv("http://127.0.0.1:8100", "turngym/Household-v0")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("look")
    env.close()                       # frees the server's session

``RemoteEnv`` behaves like the env on the server: same observations, rewards and StepInfo. A
server that reports an env error or a timeout ends the episode with ``truncated=True`` and
``info["scorable"] = False`` (never a silent reward of 0); a session the server expired is
recreated at the next reset.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from turngym.core.env import StepInfo
from turngym.core.spaces import UnicodeText

# An idle pooled connection is dropped after this many seconds, well before serve-env closes it
# (its keep-alive is 75 s), so a request never goes out on a connection the server is closing.
KEEPALIVE_S = 30.0


class ServerError(RuntimeError):
    """The server refused a call; ``status`` is the HTTP code, ``scorable`` whether the episode still counts."""

    def __init__(self, status: int, message: str, scorable: bool = True):
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.scorable = status, message, scorable


class EnvClient:
    """Thin synchronous client of one server (one HTTP connection pool; thread-safe)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 120.0):
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S),
        )

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        response = self.http.request(method, path, json=body)
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:200]}
        if response.status_code >= 400:
            raise ServerError(response.status_code, str(data.get("error", data)), bool(data.get("scorable", True)))
        return data

    def create(
        self, env_id: str, env_kwargs: dict[str, Any] | None = None, snapshot_id: str | None = None
    ) -> dict[str, Any]:
        """A new session; with ``snapshot_id`` (from ``snapshot``), in that state: the answer
        then carries its observation and info, and no reset is needed."""
        body = {"env_id": env_id, "env_kwargs": env_kwargs or {}}
        if snapshot_id is not None:
            body["snapshot_id"] = snapshot_id
        return self._call("POST", "/sessions", body)

    def snapshot(self, session_id: str) -> dict[str, Any]:
        """Keep the session's state on the server: ``{"snapshot_id", "env_id", "turn", "nbytes"}``."""
        return self._call("POST", f"/sessions/{session_id}/snapshot")

    def fork(self, session_id: str) -> dict[str, Any]:
        """A new session in the state this one is in now: ``create``'s answer, with the
        observation and info."""
        return self._call("POST", f"/sessions/{session_id}/fork")

    def delete_snapshot(self, snapshot_id: str) -> None:
        self._call("DELETE", f"/snapshots/{snapshot_id}")

    def reset(self, session_id: str, seed: int | None = None, options: dict | None = None) -> dict[str, Any]:
        return self._call("POST", f"/sessions/{session_id}/reset", {"seed": seed, "options": options})

    def step(self, session_id: str, action: str) -> dict[str, Any]:
        return self._call("POST", f"/sessions/{session_id}/step", {"action": action})

    def expert_step(self, session_id: str) -> dict[str, Any]:
        return self._call("POST", f"/sessions/{session_id}/expert_step")

    def describe(self, session_id: str) -> dict[str, Any]:
        return self._call("GET", f"/sessions/{session_id}")

    def task_ids(self, session_id: str, split: str | None = None) -> list[str]:
        params = {"split": split} if split else None
        response = self.http.get(f"/sessions/{session_id}/task_ids", params=params)
        if response.status_code >= 400:
            data = response.json()
            raise ServerError(response.status_code, str(data.get("error", data)), bool(data.get("scorable", True)))
        return response.json()["task_ids"]

    def close_session(self, session_id: str) -> None:
        try:
            self._call("DELETE", f"/sessions/{session_id}")
        except ServerError as e:
            if e.status != 404:  # already gone (expired) is fine
                raise

    def batch(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._call("POST", "/batch", {"ops": ops})["results"]

    def envs(self) -> list[str]:
        return self._call("GET", "/envs")["env_ids"]

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def close(self) -> None:
        self.http.close()


class RemoteEnv(gym.Env[str, str]):
    """A Gymnasium env whose engine runs in a ``turngym serve-env`` server."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        base_url: str,
        env_id: str,
        token: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        timeout: float = 120.0,
        render_mode: str | None = None,
        client: EnvClient | None = None,
        session: dict[str, Any] | None = None,
    ):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} is not supported; allowed: None, 'ansi'")
        self._client_args = (base_url, token, timeout)
        self.client = client or EnvClient(base_url, token=token, timeout=timeout)
        self._owns_client = client is None
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.render_mode = render_mode
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.session_id: str | None = None
        self.info: dict[str, Any] = {}
        self._last_observation = ""
        # ``session``: a session opened already (a fork's); else a new one
        if session is not None:
            self.session_id = session["session_id"]
        else:
            self._open_session()

    def _open_session(self) -> None:
        self.session_id = self.client.create(self.env_id, self.env_kwargs)["session_id"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self._owns_client and self.client.http.is_closed:  # reset after close()
            self.client = EnvClient(*self._client_args)
        if self.session_id is None:
            self._open_session()
        try:
            out = self.client.reset(self.session_id, seed=seed, options=options)
        except ServerError as e:
            if e.status == 404:  # expired on the server: a fresh session, then the same reset
                self._open_session()
                out = self.client.reset(self.session_id, seed=seed, options=options)
            elif e.status == 400:
                raise ValueError(e.message) from None
            else:
                raise
        self._last_observation, self.info = out["observation"], out["info"]
        return out["observation"], out["info"]

    def step(self, action: str):
        if self.session_id is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        try:
            out = self.client.step(self.session_id, action)
        except ServerError as e:
            if e.status == 409:
                raise gym.error.ResetNeeded(e.message) from None
            if e.status == 413:  # too long to send: the action is invalid, nothing changed
                return self._invalid(e.message)
            return self._unscorable(e)
        self._last_observation, self.info = out["observation"], out["info"]
        return out["observation"], out["reward"], out["terminated"], out["truncated"], out["info"]

    def _invalid(self, message: str):
        info = {
            **self.info,
            "action_valid": False,
            "parse_error": message,
            "messages": [{"role": "user", "content": message}],
            "reward_components": {"reward": 0.0},
        }
        return message, 0.0, False, False, info

    def _unscorable(self, e: ServerError):
        """The server lost the episode (env error, timeout, expiry): end it, flagged unscorable."""
        if e.status in (404, 504):
            self.session_id = None  # gone on the server; the next reset opens a new one
        text = f"The environment server failed: {e.message}"
        info = {
            **StepInfo().to_dict(),
            "task_id": self.info.get("task_id", ""),
            "episode_id": self.info.get("episode_id", ""),
            "turn": self.info.get("turn", 0),
            "scorable": False,
            "done_reason": "server_error",
            "messages": [{"role": "user", "content": text}],
            "reward_components": {"reward": 0.0},
        }
        return text, 0.0, False, True, info

    def fork(self) -> RemoteEnv:
        """Another RemoteEnv, on a new server session in the state this one is in now (same
        env_kwargs, turn and episode; the env must support snapshots). Both go on independently."""
        if self.session_id is None:
            raise gym.error.ResetNeeded("call reset() before fork()")
        try:
            out = self.client.fork(self.session_id)
        except ServerError as e:
            raise (ValueError(e.message) if e.status == 400 else e) from None
        base_url, token, timeout = self._client_args
        other = RemoteEnv(base_url, self.env_id, token, self.env_kwargs, timeout, self.render_mode, session=out)
        other._last_observation, other.info = out["observation"], out["info"]
        return other

    def task_ids(self, split: str | None = None) -> list[str]:
        if self.session_id is None:
            self._open_session()
        return self.client.task_ids(self.session_id, split)

    def tools(self) -> list[dict] | None:
        return self.client.describe(self.session_id)["tools"] if self.session_id else None

    def admissible_actions(self) -> list[str] | None:
        return self.client.describe(self.session_id)["admissible_actions"] if self.session_id else None

    def instructions(self) -> str:
        return self.client.describe(self.session_id)["instructions"] if self.session_id else ""

    def render(self):
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self):
        # Idempotent; frees the server's session at once rather than waiting for the idle timeout.
        if self.session_id is not None:
            try:
                self.client.close_session(self.session_id)
            except Exception:
                pass
            self.session_id = None
        if self._owns_client:
            self.client.close()
