"""``turngym serve-tools ENV``: an env's tools as an MCP server over stdio.

An external agent (any MCP client) lists the env's tools, calls them, and each call is one
``env.step`` of the episode. Two extra tools manage the episode:

    turngym_reset(task_id="", seed=0)  start a new episode; returns the instructions and first observation
    turngym_status()                   turn, reward so far, whether the episode is over

A text env without tools is served through its tools-mode twin (``...-tools-vN``) when one is
registered. Calls return the observation as text, ``is_error`` when the action was invalid, and
the step's reward and flags as structured content.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

TOOL_RESET = "turngym_reset"
TOOL_STATUS = "turngym_status"
_RESET_SPEC = {"type": "object", "properties": {
    "task_id": {"type": "string", "description": "Task to play; empty: drawn from the split by the seed."},
    "seed": {"type": "integer", "description": "Episode seed."}}}
_STATUS_SPEC = {"type": "object", "properties": {}}


class EnvSession:
    """One env and its current episode, driven by tool calls (plain Python; the MCP layer is thin)."""

    def __init__(self, env_id: str, seed: int = 0, task_id: str | None = None, split: str | None = None):
        import turngym
        from turngym.tools.registration import tools_id

        env = turngym.make(env_id)
        if not env.tools():
            twin = tools_id(env_id)
            env.close()
            try:
                env = turngym.make(twin)
            except ValueError:
                raise ValueError(f"env: {env_id!r} declares no tools and has no tools-mode twin {twin!r}") from None
            env_id = twin
        self.env_id, self.env, self.split = env_id, env, split
        self.specs = env.tools()
        names = {s["function"]["name"] for s in self.specs}
        clash = names & {TOOL_RESET, TOOL_STATUS}
        if clash:
            raise ValueError(f"env {env_id!r} has tools named {sorted(clash)}, reserved by serve-tools")
        self.reset(task_id=task_id, seed=seed)

    def reset(self, task_id: str | None = None, seed: int = 0) -> str:
        options: dict[str, Any] = {"task_id": task_id} if task_id else ({"split": self.split} if self.split else {})
        obs, info = self.env.reset(seed=seed, options=options or None)
        self.info, self.total, self.done = info, 0.0, False
        instructions = self.env.unwrapped.instructions()
        return f"{instructions}\n\n{obs}".strip() + f"\n\n[task {info['task_id']}]"

    def status(self) -> dict[str, Any]:
        return {"env": self.env_id, "task_id": self.info["task_id"], "turn": self.info["turn"],
                "return": self.total, "done": self.done, "is_success": self.info["is_success"]}

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
        """(text, is_error, structured) for one tool call."""
        if name == TOOL_RESET:
            seed = arguments.get("seed", 0)
            return self.reset(task_id=arguments.get("task_id") or None, seed=int(seed)), False, self.status()
        if name == TOOL_STATUS:
            return json.dumps(self.status()), False, self.status()
        if self.done:
            return f"The episode is over; call {TOOL_RESET} to start another.", True, self.status()
        action = json.dumps({"name": name, "arguments": arguments})
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.info, self.total = info, self.total + reward
        self.done = terminated or truncated
        text = obs
        if self.done:
            text += (f"\n\n[episode over ({info['done_reason']}): return {self.total:g}, "
                     f"success {info['is_success']}]")
        structured = {**self.status(), "reward": reward, "terminated": terminated, "truncated": truncated}
        return text, not info["action_valid"], structured

    def close(self) -> None:
        self.env.close()


def build_server(session: EnvSession):
    """The MCP low-level server whose tools are the session's."""
    import anyio
    import mcp_types as types
    from mcp.server import Server

    lock = anyio.Lock()  # one env: calls are stepped one at a time

    tools = [types.Tool(name=s["function"]["name"], description=s["function"].get("description", ""),
                        input_schema=s["function"]["parameters"]) for s in session.specs]
    tools += [types.Tool(name=TOOL_RESET, description="Start a new episode; returns the task.",
                         input_schema=_RESET_SPEC),
              types.Tool(name=TOOL_STATUS, description="The episode's turn, return and whether it is over.",
                         input_schema=_STATUS_SPEC)]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        async with lock:
            text, is_error, structured = await anyio.to_thread.run_sync(
                session.call, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error,
                                    structured_content=structured)

    return Server(f"turngym:{session.env_id}", version="0.1.0", instructions=session.env.unwrapped.instructions(),
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(session: EnvSession) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(session)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# ----- CLI: turngym serve-tools ENV ---------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", help="env id, e.g. turngym/ToolQA-v0 or turngym/Household-v0 (served in tools mode)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    p.add_argument("--task-id", help="task of the first episode (default: drawn from the split)")
    p.add_argument("--split", help="split tasks are drawn from")


def run(args) -> int:
    import anyio

    from turngym.cli import CLIError

    try:
        session = EnvSession(args.env, seed=args.seed, task_id=args.task_id, split=args.split)
    except ValueError as e:
        raise CLIError(str(e)) from None
    try:
        anyio.run(serve_stdio, session)
    finally:
        session.close()
    return 0
