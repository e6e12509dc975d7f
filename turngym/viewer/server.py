"""`turngym view RUN.jsonl|RUN_DIR [--port P]`: browse episodes in a local web page.

A standard-library HTTP server on 127.0.0.1 serves one page (static/index.html + .js + .css,
no CDN, works offline) and a small JSON API the page reads:

    GET /api/files                          the trajectory files and their episode counts
    GET /api/episodes?file=F                one summary row per episode of file F
    GET /api/episode?file=F&index=I         episode I of file F with all its turns
    GET /api/group?file=F&group=G           the rollouts of group G, aligned on state_key
    GET /api/trees?file=F                   tree rollouts: each root with its branches (trees.py)

Files are read when first asked for and read again when they change on disk, so a viewer
left open on a training run follows it.
"""

from __future__ import annotations

import argparse
import json
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from turngym.core.records import Trajectory
from turngym.viewer import data, trees

STATIC = Path(__file__).with_name("static")
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
DEFAULT_PORT = 8765


class RunStore:
    """The trajectory files of one run, loaded lazily and reloaded when they change."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.root, files = data.find_run_files(path)
        if not files:
            raise FileNotFoundError(f"{path}: no trajectory files (*.jsonl, rollouts/*.jsonl, eval/*.jsonl)")
        self.files = {self._name(p): p for p in files}
        self.splits = data.config_splits(self.root) if self.path.is_dir() else {}
        self._cache: dict[str, tuple[float, int, list[Trajectory]]] = {}
        self._lock = threading.Lock()

    def _name(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix()

    def refresh(self) -> None:
        """Pick up files a running trainer has written since (a new rollouts/update_*.jsonl)."""
        self.files = {self._name(p): p for p in data.find_run_files(self.path)[1]}

    def trajectories(self, name: str) -> list[Trajectory]:
        if name not in self.files:
            self.refresh()
        if name not in self.files:
            raise KeyError(f"file: {name!r} is not part of this run; known: {sorted(self.files)}")
        path = self.files[name]
        stat = path.stat()
        with self._lock:
            cached = self._cache.get(name)
            if cached is None or cached[:2] != (stat.st_mtime, stat.st_size):
                cached = (stat.st_mtime, stat.st_size, data.load_file(path))
                self._cache[name] = cached
        return cached[2]

    def file_list(self) -> list[dict[str, Any]]:
        # counting lines, not parsing them: a long run has hundreds of rollout files
        self.refresh()
        return [{"name": name, "episodes": data.count_episodes(path)} for name, path in self.files.items()]

    def episodes(self, name: str) -> dict[str, Any]:
        rows = [data.summarize_episode(t, i, name, self.splits) for i, t in enumerate(self.trajectories(name))]
        group_sizes: dict[str, int] = {}
        for r in rows:
            group_sizes[r["group_id"]] = group_sizes.get(r["group_id"], 0) + 1
        for r in rows:
            r["group_size"] = group_sizes[r["group_id"]] if r["group_id"] else 1
        return {
            "file": name,
            "episodes": rows,
            "branches": sum(bool(r["parent"]) for r in rows),
            "advantage_scale": max((r["max_abs_advantage"] for r in rows), default=0.0),
        }

    def episode(self, name: str, index: int) -> dict[str, Any]:
        trajs = self.trajectories(name)
        if not 0 <= index < len(trajs):
            raise KeyError(f"index: {index} is out of range; {name} has {len(trajs)} episodes")
        return data.episode_view(trajs[index], index, name, self.splits)

    def group(self, name: str, group_id: str) -> dict[str, Any]:
        members = [(i, t) for i, t in enumerate(self.trajectories(name)) if t.group_id == group_id]
        if not members:
            raise KeyError(f"group: no episodes with group_id {group_id!r} in {name}")
        views = [data.episode_view(t, i, name, self.splits) for i, t in members]
        rows = data.align_group([[s.state_key for s in t.steps] for _, t in members])
        return {"file": name, "group_id": group_id, "members": views, "rows": rows}


def make_handler(store: RunStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "turngym-view"

        def log_message(self, format: str, *args: Any) -> None:  # keep the terminal quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                if url.path in ("/", "/index.html"):
                    return self._static("index.html")
                if url.path.startswith("/static/"):
                    return self._static(url.path.removeprefix("/static/"))
                if url.path == "/api/files":
                    return self._json({"root": str(store.root), "files": store.file_list()})
                if url.path == "/api/episodes":
                    return self._json(store.episodes(query.get("file", "")))
                if url.path == "/api/episode":
                    return self._json(store.episode(query.get("file", ""), int(query.get("index", "-1"))))
                if url.path == "/api/trees":
                    name = query.get("file", "")
                    return self._json({"file": name, "groups": trees.tree_view(store.trajectories(name))})
                if url.path == "/api/group":
                    return self._json(store.group(query.get("file", ""), query.get("group", "")))
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {url.path}")
            except (KeyError, ValueError) as e:
                self._error(HTTPStatus.NOT_FOUND, str(e.args[0]) if e.args else str(e))

        def _static(self, name: str) -> None:
            path = (STATIC / name).resolve()
            if path.parent != STATIC.resolve() or not path.is_file():
                return self._error(HTTPStatus.NOT_FOUND, f"no such file: {name}")
            self._send(path.read_bytes(), CONTENT_TYPES.get(path.suffix, "application/octet-stream"))

        def _json(self, payload: Any) -> None:
            self._send(json.dumps(payload, ensure_ascii=False).encode(), "application/json; charset=utf-8")

        def _error(self, status: HTTPStatus, message: str) -> None:
            self._send(json.dumps({"error": message}).encode(), "application/json; charset=utf-8", status)

        def _send(self, body: bytes, content_type: str, status: HTTPStatus = HTTPStatus.OK) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    return Handler


def make_server(path: str | Path, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for the run at ``path`` (port 0 picks a free one); call ``serve_forever()``."""
    server = ThreadingHTTPServer((host, port), make_handler(RunStore(path)))
    server.daemon_threads = True
    return server


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a trajectory JSONL file or a run directory")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 = any free)",
    )
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")


def run(args) -> int:
    from turngym.core.commands import CLIError, serve_until_interrupted

    try:
        server = make_server(args.path, args.port)
    except FileNotFoundError as e:
        raise CLIError(str(e)) from None
    except OSError as e:
        raise CLIError(f"--port: cannot listen on 127.0.0.1:{args.port} ({e.strerror}); try --port 0") from None
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"turngym view: {args.path} at {url}  (Ctrl-C to stop)", flush=True)
    if args.open:
        webbrowser.open(url)
    return serve_until_interrupted(server)
