"""The ``turngym`` command. Built-in commands live here; larger ones (train, serve, view, ...)
live in their own modules, imported only when that command runs, so ``turngym list`` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from pathlib import Path

from turngym.core.commands import CLIError, format_table

# name -> (one-line help, module with add_arguments(parser) and run(args) -> int)
EXTERNAL_COMMANDS: dict[str, tuple[str, str]] = {
    # first, so that `turngym --help` lists it right after the built-in commands, as it always has
    "check": (
        "check that an env's reward measures skill (expert, degenerate policies, exploits, invalid actions, seeds)",
        "turngym.check.command",
    ),
    "demo": ("the README's main job: the best end-to-end run on the embedded model", "turngym.demo"),
    "train": ("train a policy with RL (and SFT) from a YAML/TOML config", "turngym.trainers.cli"),
    "serve-shop": ("serve the shop as a website on localhost, for people to use", "turngym.envs.shop.serve"),
    "serve-tools": (
        "serve an env's tools as an MCP server (stdio, or streamable HTTP with --http)",
        "turngym.tools.mcp_server",
    ),
    "serve-env": (
        "serve many sessions of registered envs over HTTP (for trainers on other machines)",
        "turngym.integrations.env_server.cli",
    ),
    "view": (
        "browse a run's episodes in a local web page (turns, spans, advantages, groups)",
        "turngym.viewer.server",
    ),
    "report": (
        "write a run's self-contained HTML report (curves, success, lengths, invalid actions)",
        "turngym.viewer.report",
    ),
    "compare": (
        "compare policies' evaluations: success with 95% intervals, tasks gained and lost per pair "
        "with the exact sign test (refused across env versions)",
        "turngym.viewer.compare",
    ),
    "serve-policy": ("serve a local model as an OpenAI-compatible HTTP API", "turngym.agents.serve"),
}


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake prints one line naming the command (not the top-level usage),
    with a close match for a misspelt option."""

    def error(self, message: str):
        if message.startswith("unrecognized arguments:"):
            options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            hints = []
            for word in message.split(":", 1)[1].split():
                close = difflib.get_close_matches(word.split("=")[0], options, n=1)
                if close:
                    hints.append(f"{word} -> {close[0]}?")
            if hints:
                message += f" (did you mean {', '.join(hints)})"
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "integer >= 1"  # argparse names the type in its message


def _add_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", help="only envs of this family")
    p.add_argument(
        "--splits",
        action="store_true",
        help="also build each env and print its splits with their task counts (slower)",
    )


def _run_list(args) -> int:
    import turngym

    specs = [s for s in turngym.list_envs() if not args.family or turngym.tags(s.id).family == args.family]
    if args.family and not specs:
        families = sorted({turngym.tags(s.id).family for s in turngym.list_envs()})
        raise CLIError(f"--family: no env of family {args.family!r}; allowed: {', '.join(families)}")
    if args.splits:
        return _print_splits(specs)
    width = max((len(s.id) for s in specs), default=10)
    for s in specs:
        t = turngym.tags(s.id)
        tags = (
            f"[{t.family}/{t.modality}{'; needs ' + ','.join(t.needs) if t.needs else ''}"
            f"{'; snapshots' if turngym.snapshots_supported(s.id) else ''}]"
        )
        print(f"{s.id:<{width}}  {tags:<39} {t.description}")
    if not specs:
        print("no environments registered")
    return 0


def _print_splits(specs) -> int:
    import turngym
    from turngym.core.splits import splits_of

    width = max(len(s.id) for s in specs)
    for s in specs:
        try:
            env = turngym.make(s.id)
        except Exception as e:  # noqa: BLE001 - one env that cannot be built must not hide the rest
            print(f"{s.id:<{width}}  (cannot build: {type(e).__name__}: {str(e)[:80]})")
            continue
        try:
            counts = ", ".join(f"{split} {len(env.task_ids(split))}" for split in splits_of(env))
            print(f"{s.id:<{width}}  default {env.split}; {counts}")
        finally:
            env.close()
    return 0


def _add_play(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", help="env id, e.g. turngym/Household-v0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-id", help="play this task (default: drawn from the split)")
    p.add_argument("--split", help="split to draw the task from")


def _run_play(args) -> int:
    import turngym

    env = _make(args.env)
    options = {"task_id": args.task_id} if args.task_id else {"split": args.split} if args.split else None
    obs, info = env.reset(seed=args.seed, options=options)
    print(info["messages"][0]["content"] if info["messages"] and info["messages"][0]["role"] == "system" else "")
    total = 0.0
    while True:
        print("\n" + obs)
        if info.get("admissible_actions"):
            print("\nAdmissible actions: " + " | ".join(info["admissible_actions"]))
        try:
            action = input("> ")
        except EOFError:
            print()
            break
        if action.strip() in {":q", "quit", "exit"}:
            break
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            print("\n" + obs)
            print(f"\nEpisode over ({info['done_reason']}): return {total:g}, success {info['is_success']}")
            break
    env.close()
    del turngym
    return 0


def _add_eval(p: argparse.ArgumentParser) -> None:
    from turngym.core.pool import BACKENDS

    p.add_argument("env", help="env id")
    p.add_argument("--policy", default="expert", help="expert | random | human | hf:NAME_OR_PATH | openai:URL")
    p.add_argument("--episodes", type=positive_int, help="number of tasks (default: the whole split)")
    p.add_argument("--split", help="task split (default: the env's)")
    p.add_argument("--group-size", type=positive_int, default=1, help="rollouts per task")
    p.add_argument("--out", help="write trajectories to this JSONL file")
    p.add_argument("--num-envs", type=positive_int, default=4)
    p.add_argument(
        "--backend",
        default="thread",
        choices=BACKENDS,
        help=" | ".join(BACKENDS) + " (inline: the same batches every run, so a greedy evaluation repeats "
        "bit for bit; with the others a batch holds whichever envs answered first)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-turns",
        type=positive_int,
        default=200,
        help="turns per episode at most (default 200; the env's own limit applies too)",
    )
    p.add_argument("--model-kwargs", default="", help="extra policy options, k=v,k=v")
    p.add_argument(
        "--env-kwargs",
        default="",
        help="env options, k=v,k=v, each value read as YAML (0.1, false, text), as turngym.make takes them",
    )


def evaluate(
    env_id: str,
    policy,
    split: str | None = None,
    episodes: int | None = None,
    group_size: int = 1,
    num_envs: int = 4,
    backend: str = "thread",
    seed: int = 0,
    out: str | None = None,
    progress: bool = True,
    max_turns: int = 200,
    env_kwargs: dict | None = None,
):
    """Run a policy on tasks of a split; returns (trajectories, summary dict: the env id and its
    content hash, then ``summarize``'s figures)."""
    from tqdm import tqdm

    import turngym

    env_kwargs = dict(env_kwargs or {})
    env = _make(env_id, env_kwargs)
    split = split or env.split
    tasks = _task_ids(env, split, env_id)
    env.close()
    if episodes is not None:
        tasks = tasks[:episodes]
    bar = tqdm(total=len(tasks) * group_size, desc=f"eval {env_id}", disable=not progress, unit="ep")

    def on_trajectory(traj):
        traj.metadata.setdefault("split", split)  # the report groups results by split
        if out:
            turngym.write_jsonl(out, [traj])

    if out:
        _check_out(out)
        Path(out).unlink(missing_ok=True)
    from turngym.core.collect import collect
    from turngym.core.runs import summarize

    try:
        with turngym.EnvPool(env_id, num_envs=num_envs, backend=backend, env_kwargs=env_kwargs) as pool:
            # the trainer's rollout: per-turn progress (turns done, tokens/s), since LLM episodes
            # can take minutes each
            trajs = collect(
                pool,
                policy,
                tasks,
                group_size=group_size,
                seed=seed,
                max_turns=max_turns,
                on_trajectory=on_trajectory,
                bar=bar,
            )
    except BaseException:
        bar.leave = False  # clear the bar: the error that follows is the one line to read
        bar.close()
        raise
    bar.close()
    return trajs, {"env_id": env_id, "env_hash": pool.env_hash, **summarize(trajs)}


def _task_ids(env, split: str, env_id: str) -> list[str]:
    """The split's task ids, or one line naming the splits the env has."""
    from turngym.core.splits import split_task_ids

    try:
        return split_task_ids(env, split, "--split", env_id)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _check_out(out: str) -> None:
    """--out must be a file we can create: no folder in the way, no file where a folder should be."""
    path = Path(out)
    if path.is_dir():
        raise CLIError(f"--out: {out} is a folder; give a file name such as {path / 'eval.jsonl'}")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise CLIError(f"--out: {parent} is a file, so {out} cannot be created under it")


def parse_kwargs(text: str, flag: str = "--model-kwargs") -> dict[str, str]:
    options = {}
    for item in (kv.strip() for kv in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"{flag}: {item!r} must be key=value (several as k=v,k=v)")
        options[key.strip()] = value
    return options


def parse_env_kwargs(text: str) -> dict:
    """``--env-kwargs``: each value read as a YAML scalar, so ``false`` and ``0.1`` arrive typed."""
    import yaml

    out = {}
    for key, value in parse_kwargs(text, "--env-kwargs").items():
        try:
            out[key] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            out[key] = value  # plain text; the env's own check names the field if it is wrong
    return out


def _run_eval(args) -> int:
    from turngym.agents.loading import load_policy
    from turngym.core.versions import trained_on_note

    options = parse_kwargs(args.model_kwargs)
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    if args.out:
        _check_out(args.out)
    _make(args.env, env_kwargs).close()  # an unknown env id or option fails before a model loads
    if args.policy.startswith("hf"):
        from turngym.agents.engine.memory import keep_freed_memory

        keep_freed_memory()  # the CLI owns its process: no page faults for each decoding step's cache
    try:
        policy = load_policy(args.policy, seed=args.seed, **options)
    except ValueError as e:
        raise CLIError(str(e)) from None
    trajs, summary = evaluate(
        args.env,
        policy,
        split=args.split,
        episodes=args.episodes,
        group_size=args.group_size,
        num_envs=args.num_envs,
        backend=args.backend,
        seed=args.seed,
        out=args.out,
        max_turns=args.max_turns,
        env_kwargs=env_kwargs,
    )
    row = {"env": args.env, "policy": args.policy, **summary}
    print(
        format_table(
            [row],
            [
                "env",
                "env_hash",
                "policy",
                "episodes",
                "unscorable",
                "success_rate",
                "mean_return",
                "mean_steps",
            ],
        )
    )
    note = trained_on_note(args.policy, args.env, summary["env_hash"])
    if note:
        print(f"turngym eval: warning: {note}", file=sys.stderr)
    failed = [t for t in trajs if not t.scorable]
    if failed:
        reason = str(failed[0].metadata.get("error", "no reason recorded")).strip().splitlines() or ["?"]
        print(
            f"{len(failed)} of {len(trajs)} episodes unscorable; the first because: {reason[-1][:300]}",
            file=sys.stderr,
        )
    if args.out:
        from turngym.viewer import write_report

        print(f"trajectories: {args.out}")
        print(f"report: {write_report(args.out)}")
    return 0


def _make(env_id: str, env_kwargs: dict | None = None):
    import turngym

    try:
        return turngym.make(env_id, **(env_kwargs or {}))
    except (ValueError, TypeError) as e:
        raise CLIError(str(e)) from None


BUILTIN_COMMANDS = {
    "list": ("list registered environments with tags and descriptions", _add_list, _run_list),
    "play": ("play an env yourself in the terminal", _add_play, _run_play),
    "eval": ("evaluate a policy on an env and print a summary table", _add_eval, _run_eval),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineParser(prog="turngym", description="Environments, tools and RL trainers for LLM agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    parser.command_parsers = {}
    for name, (help_, add, _) in BUILTIN_COMMANDS.items():
        parser.command_parsers[name] = p = sub.add_parser(name, help=help_.replace("%", "%%"), description=help_)
        add(p)
    for name, (help_, module) in EXTERNAL_COMMANDS.items():
        # argparse %-formats a command's help line ("95% intervals" would crash --help)
        parser.command_parsers[name] = p = sub.add_parser(name, help=help_.replace("%", "%%"), description=help_)
        if name == command:  # import a heavy module only for the command that runs
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help()
        return 0
    if unknown:  # name the command's own usage, not the top-level one
        parser.command_parsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        if args.command in BUILTIN_COMMANDS:
            return BUILTIN_COMMANDS[args.command][2](args) or 0
        return importlib.import_module(EXTERNAL_COMMANDS[args.command][1]).run(args) or 0
    except KeyboardInterrupt:
        if args.command == "train":
            print(
                "turngym train: interrupted; run the same command again to resume from the last checkpoint in run_dir",
                file=sys.stderr,
            )
        return 130
    except Exception as e:  # noqa: BLE001 - the user gets one line, TURNGYM_DEBUG=1 the traceback
        if os.environ.get("TURNGYM_DEBUG") or not isinstance(e, USER_ERRORS):
            raise
        print(f"turngym {args.command}: {one_line(e)}", file=sys.stderr)
        return 2


#: errors that mean a mistake in what the user gave (the library's convention: ValueError names
#: the field), or something outside turngym that is down (a server, a file): one line, exit 2
USER_ERRORS = (CLIError, ValueError, TypeError, LookupError, OSError, ImportError)


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines) if len(lines) <= 3 else lines[0]
    if not isinstance(error, (CLIError, ValueError)) or not text:
        text = f"{type(error).__name__}: {text} (TURNGYM_DEBUG=1 shows the traceback)"
    return text[:600]


if __name__ == "__main__":
    raise SystemExit(main())
