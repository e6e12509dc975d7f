"""The ``turngym`` command. Built-in commands live here; larger ones (train, serve, view, ...)
live in their own modules, imported only when that command runs, so ``turngym list`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

# name -> (one-line help, module with add_arguments(parser) and run(args) -> int)
EXTERNAL_COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("the README's main job: the best end-to-end run on the embedded model", "turngym.demo"),
    "train": ("train a policy with RL (and SFT) from a YAML/TOML config", "turngym.trainers.cli"),
    "serve": ("serve an environment as a website on localhost (shop)", "turngym.envs.shop.serve"),
    "serve-tools": ("serve an env's tools as an MCP server over stdio", "turngym.tools.mcp_server"),
    "view": ("browse a run's episodes in a local web page (turns, spans, advantages, groups)", "turngym.viewer.server"),
    "report": ("write a run's self-contained HTML report (curves, success, lengths, invalid actions)",
               "turngym.viewer.report"),
    "serve-policy": ("serve a local model as an OpenAI-compatible HTTP API", "turngym.agents.serve"),
}


class CLIError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def serve_until_interrupted(server) -> int:
    """Serve an http.server until Ctrl-C, then close its socket; the exit code."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _add_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", help="only envs of this family")


def _run_list(args) -> int:
    import turngym

    specs = [s for s in turngym.list_envs() if not args.family or s.family == args.family]
    width = max((len(s.id) for s in specs), default=10)
    for s in specs:
        tags = f"[{s.family}/{s.modality}{'; needs ' + ','.join(s.needs) if s.needs else ''}]"
        print(f"{s.id:<{width}}  {tags:<28} {s.description}")
    if not specs:
        print("no environments registered")
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
    p.add_argument("env", help="env id")
    p.add_argument("--policy", default="expert", help="expert | random | human | hf:NAME_OR_PATH | openai:URL")
    p.add_argument("--episodes", type=int, help="number of tasks (default: the whole split)")
    p.add_argument("--split", help="task split (default: the env's)")
    p.add_argument("--group-size", type=int, default=1, help="rollouts per task")
    p.add_argument("--out", help="write trajectories to this JSONL file")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--backend", default="thread", help="inline | thread | process | ray")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-kwargs", default="", help="extra policy options, k=v,k=v")


def evaluate(env_id: str, policy, split: str | None = None, episodes: int | None = None,
             group_size: int = 1, num_envs: int = 4, backend: str = "thread", seed: int = 0,
             out: str | None = None, progress: bool = True):
    """Run a policy on tasks of a split; returns (trajectories, summary dict)."""
    from tqdm import tqdm

    import turngym

    env = _make(env_id)
    split = split or env.split
    tasks = env.task_ids(split)
    env.close()
    if not tasks:
        raise CLIError(f"--split: {split!r} has no tasks for {env_id}")
    if episodes is not None:
        tasks = tasks[:episodes]
    bar = tqdm(total=len(tasks) * group_size, desc=f"eval {env_id}", disable=not progress, unit="ep")
    written = []

    def on_trajectory(traj):
        bar.update(1)
        traj.metadata.setdefault("split", split)  # the report groups results by split
        if out:
            turngym.write_jsonl(out, [traj])
        written.append(traj)

    if out:
        Path(out).unlink(missing_ok=True)
    from turngym.trainers.rollout import with_progress

    with turngym.EnvPool(env_id, num_envs=num_envs, backend=backend) as pool:
        # per-turn progress (turns done, tokens/s): LLM episodes can take minutes each
        trajs = pool.rollout(with_progress(policy, bar), tasks, group_size=group_size, seed=seed, on_trajectory=on_trajectory)
    bar.close()
    return trajs, summarize(trajs)


def summarize(trajs) -> dict:
    scorable = [t for t in trajs if t.scorable]
    n = max(len(scorable), 1)
    return {
        "episodes": len(trajs),
        "unscorable": len(trajs) - len(scorable),
        "success_rate": sum(t.success for t in scorable) / n,
        "mean_return": sum(t.episode_return for t in scorable) / n,
        "mean_steps": sum(t.length for t in scorable) / n,
    }


def format_table(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    widths = [max(len(c), *(len(cell(r.get(c, ""))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(cell(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))
    return "\n".join(lines)


def _run_eval(args) -> int:
    from turngym.agents.loading import load_policy

    options = dict(kv.split("=", 1) for kv in args.model_kwargs.split(",") if kv)
    try:
        policy = load_policy(args.policy, seed=args.seed, **options)
    except ValueError as e:
        raise CLIError(str(e)) from None
    _, summary = evaluate(args.env, policy, split=args.split, episodes=args.episodes,
                          group_size=args.group_size, num_envs=args.num_envs, backend=args.backend,
                          seed=args.seed, out=args.out)
    row = {"env": args.env, "policy": args.policy, **summary}
    print(format_table([row], ["env", "policy", "episodes", "unscorable", "success_rate",
                               "mean_return", "mean_steps"]))
    if args.out:
        from turngym.viewer import write_report

        print(f"trajectories: {args.out}")
        print(f"report: {write_report(args.out)}")
    return 0


def _make(env_id: str):
    import turngym

    try:
        return turngym.make(env_id)
    except ValueError as e:
        raise CLIError(str(e)) from None


BUILTIN_COMMANDS = {
    "list": ("list registered environments with tags and descriptions", _add_list, _run_list),
    "play": ("play an env yourself in the terminal", _add_play, _run_play),
    "eval": ("evaluate a policy on an env and print a summary table", _add_eval, _run_eval),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turngym", description="Environments, tools and RL trainers for LLM agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add, _) in BUILTIN_COMMANDS.items():
        add(sub.add_parser(name, help=help_, description=help_))
    for name, (help_, module) in EXTERNAL_COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == command:  # import a heavy module only for the command that runs
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command in BUILTIN_COMMANDS:
            return BUILTIN_COMMANDS[args.command][2](args) or 0
        return importlib.import_module(EXTERNAL_COMMANDS[args.command][1]).run(args) or 0
    except CLIError as e:
        print(f"turngym {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
