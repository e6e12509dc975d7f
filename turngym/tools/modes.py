"""Tools mode: a text-command env played through tool calls, with the same engine underneath.

``ToolsModeEnv`` owns an instance of the text env (the *base*). Each declared verb is a tool
whose call becomes a command through its template (``go_to(target="fridge 1")`` ->
``go to fridge 1``), forwarded to the base env's ``step``. Tool results come back as
``role: "tool"`` messages (with the call id and name) in ``info["messages"]``; ``info["tools"]``
on reset holds the specs. The base's admissible commands and its expert's commands are mapped
back to tool calls (Hermes text), so random and expert policies work in this mode too.

Several calls in one completion run in order until the episode ends. ``on_error`` decides what a
broken call does: ``"feedback"`` (default) reports it to the model and changes nothing;
``"end"`` ends the episode (``done_reason="tool_error"``). With ``plain_commands=True`` a
completion with no call syntax at all is passed to the base env as a plain command.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from gymnasium.envs.registration import load_env_creator

from turngym.core.env import TurnEnv
from turngym.tools.executor import ON_ERROR, Executor, ToolResult
from turngym.tools.parsers import ParseResult, ToolCall, format_hermes, parse_tool_calls
from turngym.tools.schema import Tool, ToolSet
from turngym.tools.verbs import resolve_verbs

TOOLS_MODE_NOTE = (
    "Act by calling the tools you are given, one or more per turn, e.g.\n"
    '<tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>\n'
    "Each tool result comes back as a tool message."
)


def verb_tool(v: dict[str, Any]) -> Tool:
    """A Tool whose function returns the command text of a call."""
    params = v.get("parameters", {})
    placeholders = re.findall(r"{(\w+)}", v["command"])
    if set(placeholders) != set(params):
        raise ValueError(f"verb {v['name']!r}: command placeholders {placeholders} != parameters {sorted(params)}")
    spec = {
        "type": "function",
        "function": {
            "name": v["name"],
            "description": v["description"],
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                **({"required": list(params)} if params else {}),
            },
        },
    }
    template = v["command"]

    def to_command(**kwargs: str) -> str:
        # newlines would smuggle a second command into one argument; the base env sees one line
        return template.format(**{k: " ".join(str(val).split()) for k, val in kwargs.items()})

    return Tool(name=v["name"], fn=to_command, spec=spec, timeout=None)


def _command_pattern(template: str) -> re.Pattern:
    parts = re.split(r"({\w+})", template)
    regex = "".join(f"(?P<{p[1:-1]}>.+?)" if re.fullmatch(r"{\w+}", p) else re.escape(p) for p in parts)
    return re.compile(regex, re.DOTALL)


class ToolsModeEnv(TurnEnv):
    """Tools mode over a registered text env (see the module docstring).

    Snapshots work when the base env's do: a snapshot holds this env's state and the base's."""

    # true here so that `turngym list` can say so without building the env; each instance
    # takes its base's value (registry.snapshots_supported reads the base's class too)
    metadata = {**TurnEnv.metadata, "snapshots": True}
    # this shim is pure Python; serve-env shares a process only when the base env says it may too
    shares_process = True
    # fixed at construction (the base is snapshotted through its own hooks; the action cache is
    # a pure cache of command -> call text)
    snapshot_shared = ("base", "verbs", "toolset", "executor", "_patterns", "_formats", "_action_cache")

    def __init__(
        self,
        base_id: str,
        base_entry_point: str,
        verbs: str | list[dict[str, Any]],
        base_kwargs: dict[str, Any] | None = None,
        on_error: str = "feedback",
        plain_commands: bool = True,
        split: str | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error: {on_error!r} is not allowed; allowed: {list(ON_ERROR)}")
        base_kwargs = {**(base_kwargs or {}), **overrides}
        if split is not None:
            base_kwargs["split"] = split
        self.base = load_env_creator(base_entry_point)(**base_kwargs)
        self.metadata = {**self.metadata, "snapshots": bool(self.base.metadata.get("snapshots"))}
        self.default_split = self.base.split  # the base decides which split is the default
        super().__init__(split=split or self.base.split, max_turns=max_turns, render_mode=render_mode)
        self.base_id = base_id
        self.on_error = on_error
        self.plain_commands = plain_commands
        self.verbs = resolve_verbs(verbs)
        self.toolset = ToolSet([verb_tool(v) for v in self.verbs])
        self.executor = Executor(self.toolset, timeout=None)
        self._patterns = [
            (v["name"], _command_pattern(t)) for v in self.verbs for t in [v["command"], *v.get("aliases", [])]
        ]
        self._formats = ("hermes", "json", "react") + (("command",) if plain_commands else ())
        self._base_info: dict[str, Any] = {}
        self._action_cache: dict[str, str | None] = {}
        self._reset_args: tuple[int | None, dict[str, Any] | None] = (None, None)

    # ----- snapshots: this env's attributes and the base env's state ------------------------------
    def _shared_objects(self) -> dict[str, Any]:
        base = {f"base.{k}": v for k, v in self.base._shared_objects().items()}
        return {**base, **super()._shared_objects()}

    def _snapshot_state(self) -> dict[str, Any]:
        return {**super()._snapshot_state(), "base state": self.base._snapshot_state()}

    def _restore_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.base._restore_state(state.pop("base state"))
        super()._restore_state(state)

    # ----- tasks and state come from the base env -----------------------------------------------
    def task_ids(self, split: str | None = None) -> list[str]:
        return self.base.task_ids(split or self.split)

    def get_task(self, task_id: str) -> dict[str, Any]:
        return self.base.get_task(task_id)

    def state(self) -> Any:
        return self.base.state()

    def tools(self) -> list[dict]:
        return self.toolset.specs()

    def instructions(self) -> str:
        example = self.verbs[0]
        args = "{" + ", ".join(f'"{p}": "..."' for p in example.get("parameters", {})) + "}"
        note = TOOLS_MODE_NOTE.format(name=example["name"], args=args)
        base = self.base.instructions()
        return f"{base}\n\n{note}" if base else note

    # ----- commands <-> calls --------------------------------------------------------------------
    def command_to_call(self, command: str) -> ToolCall | None:
        """The tool call that produces ``command``, or None when no verb matches."""
        for name, pattern in self._patterns:
            m = pattern.fullmatch(command.strip())
            if m:
                return ToolCall(name=name, arguments=m.groupdict())
        return None

    def _as_action(self, command: str) -> str | None:
        # admissible lists repeat from turn to turn: remember each command's call text
        if command in self._action_cache:
            return self._action_cache[command]
        call = self.command_to_call(command)
        action = format_hermes(call) if call is not None else command if self.plain_commands else None
        if len(self._action_cache) > 50_000:
            self._action_cache.clear()
        self._action_cache[command] = action
        return action

    def _admissible(self, commands: list[str] | None) -> list[str] | None:
        if commands is None:
            return None
        return [a for a in (self._as_action(c) for c in commands) if a is not None]

    def admissible_actions(self) -> list[str] | None:
        return self._admissible(self.base.admissible_actions())

    def expert_action(self) -> str:
        command = self.base.expert_action()
        call = self.command_to_call(command)
        return format_hermes(call) if call is not None else command

    # ----- episode -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        # The base gets the same seed and options, so its RNG moves in lockstep with this one and
        # reset(seed=s) gives the very episode the text-mode id gives for seed s.
        if options and "snapshot" in options:
            return super().reset(seed=seed, options=options)
        if seed is None and self._np_random is None:
            seed = secrets.randbits(31)
        self._reset_args = (seed, options)
        return super().reset(seed=seed, options=options)

    def _reset(self, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        seed, options = self._reset_args
        obs, info = self.base.reset(seed=seed, options=options)
        if info["task_id"] != task["task_id"]:  # a base that draws tasks its own way: pin ours
            obs, info = self.base.reset(seed=self.episode_seed, options={"task": task})
        self._base_info = info
        return obs, {
            "admissible_actions": self._admissible(info["admissible_actions"]),
            "state_key": info["state_key"],
            "progress": info["progress"],
            "extra": {**info["extra"], "base_id": self.base_id},
        }

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        parsed = parse_tool_calls(action, self._formats)
        if parsed.command is not None:
            return self._plain_command(parsed.command)
        if parsed.error:
            return self._broken(
                parsed,
                ToolResult("call_0", "", f"Error: could not parse the tool call: {parsed.error}", "parse_error"),
            )
        if not parsed.calls:
            return self._broken(parsed, ToolResult("call_0", "", "Error: no tool call found", "parse_error"))
        for i, call in enumerate(parsed.calls):
            call.id = call.id or f"call_{self.turn}_{i}"
        return self._run_calls(parsed)

    def _plain_command(self, command: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.base.step(command)
        self._base_info = info
        fields = self._carry(info)
        fields.update(
            action_valid=info["action_valid"],
            parse_error=info["parse_error"],
            reward_components=info["reward_components"],
            messages=[{"role": "user", "content": obs}],
            extra={**info["extra"], "commands": [command]},
        )
        return obs, reward, terminated, truncated, fields

    def _carry(self, info: dict[str, Any]) -> dict[str, Any]:
        # the base already hashed the same state: reuse its key rather than hash it twice
        fields = {
            "admissible_actions": self._admissible(info["admissible_actions"]),
            "state_key": info["state_key"],
            "progress": info["progress"],
            "is_success": info["is_success"],
            "scorable": info["scorable"],
        }
        if info["done_reason"]:
            fields["done_reason"] = info["done_reason"]
        return fields

    def _unchanged(self) -> dict[str, Any]:
        """Fields of a turn in which the base env did not move: its last state still holds."""
        last = self._base_info
        return {
            "state_key": last.get("state_key") or None,
            "progress": last.get("progress", 0.0),
            "admissible_actions": self._admissible(last.get("admissible_actions")),
        }

    def _broken(self, parsed: ParseResult, result: ToolResult):
        """A turn whose calls could not run at all: feedback (state unchanged) or the end."""
        end = self.on_error == "end"
        # no call ran, so there is no call id to answer: the error goes back as a user message
        fields = {
            "action_valid": False,
            "parse_error": f"{result.error}: {parsed.error or result.content}",
            "messages": [{"role": "user", "content": result.content}],
            **self._unchanged(),
            "extra": {
                "tool_calls": [c.to_openai() for c in parsed.calls],
                "tool_results": [result.to_dict()],
                "tool_errors": [result.error],
            },
        }
        if end:
            fields["done_reason"] = "tool_error"
        return result.content, 0.0, end, False, fields

    def _run_calls(self, parsed: ParseResult):
        results: list[ToolResult] = []
        commands: list[str] = []
        reward, terminated, truncated = 0.0, False, False
        components: dict[str, float] = {}
        info: dict[str, Any] = {}
        valid = True
        errors: list[str] = []
        for call in parsed.calls:
            if terminated or truncated:
                results.append(
                    ToolResult(call.id or f"call_{len(results)}", call.name, "Not run: the episode had ended.", None)
                )
                continue
            t, prepared = self.executor.prepare(call)
            if t is None:
                result: ToolResult = prepared  # type: ignore[assignment]
                results.append(result)
                errors.append(result.error or "")
                valid = False
                if self.on_error == "end":
                    terminated = True
                continue
            command = t.fn(**prepared)  # type: ignore[arg-type]
            commands.append(command)
            obs, r, terminated, truncated, info = self.base.step(command)
            self._base_info = info
            reward += r
            for k, v in info["reward_components"].items():
                components[k] = components.get(k, 0.0) + v
            valid = valid and info["action_valid"]
            results.append(ToolResult(call.id, call.name, obs))
        observation = (
            results[0].content if len(results) == 1 else "\n\n".join(f"[{r.name}] {r.content}" for r in results)
        )
        fields: dict[str, Any] = self._carry(info) if info else self._unchanged()
        fields.update(
            action_valid=valid,
            messages=[r.message() for r in results],
            reward_components=components or {"reward": reward},
            extra={
                **(info.get("extra", {}) if info else {}),
                "commands": commands,
                "tool_calls": [c.to_openai() for c in parsed.calls],
                "assistant_content": parsed.content,
                "tool_results": [r.to_dict() for r in results],
                "tool_errors": errors,
            },
        )
        if errors:
            first = next(r for r in results if r.error)
            fields["parse_error"] = f"{first.error}: {first.content}"
            if self.on_error == "end":
                fields["done_reason"] = "tool_error"
        elif info and info["parse_error"]:
            fields["parse_error"] = info["parse_error"]
        return observation, reward, terminated, truncated, fields

    def close(self) -> None:
        self.base.close()
        super().close()
