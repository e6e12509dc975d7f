"""`turngym demo` (`make demo`): train the embedded SmolLM2-135M on an easy household preset, on CPU.

1. evaluate the untrained model zero-shot on held-out tasks (greedy), when asked;
2. imitate a few dozen expert episodes (SFT, LoRA);
3. reinforce with GiGPO (step-level credit from the env's state keys) for a few updates;
4. evaluate again on the sealed test split (the household's games on ALFRED's 24 test floor
   plans), print a before/after table with 95% intervals, say plainly whether RL beat SFT, and
   write the learning curves (PNG).

The numbers are whatever this run measures. Everything goes to ``--run-dir`` (default
``runs/demo``) in the layout ``turngym train`` uses, so ``turngym view``/reports read it too.
The settings are frozen in ``benchmarks/results/demo/settings.json``, which names for each the
split and the runs that chose it; none was chosen on the test split (docs/training.md).
"""

from __future__ import annotations

import argparse
import os
import time

from turngym.core.stats import paired_outcomes, sign_test, sign_test_power, wilson

ENV_ID = "turngym/Household-Easy-v0"
# episodes of the evaluations after SFT and after RL, per split: on the sealed test split the first
# 144 tasks, six on each of its 24 floor plans; on the two validation splits every task
EVAL_TASKS = {"test": 144, "valid_unseen": 134, "valid_seen": 140}
UPDATES = 16
LR = 3e-4
KL = 0.1
CURVE_EPISODES = 34
PROCESSES = 2  # data-parallel, one thread each on 2 cores: faster than one process of two (docs/benchmarks.md)
TARGET_GAIN = 0.10  # what the demo sets out to show: RL beats SFT by this much, paired p < 0.05
SYSTEM_PROMPT = "You are an agent in a household. Each turn, pick one of the admissible actions."


def demo_overrides(args) -> list[str]:
    """The demo's training config, as `turngym train` overrides (print with --show-config).

    What the settings do (benchmarks/results/demo/settings.json says which split and runs chose
    each; docs/training.md has the measurements):
    - rewards: the env adds ``shaped_reward`` for subgoal progress and subtracts
      ``invalid_action_penalty`` for a command it rejects, so members of a group that all fail
      still differ (how far each got, how many junk commands), and GiGPO has a signal; without
      the penalty RL drifted into repeating invalid commands;
    - SFT on 32 expert episodes, 2 epochs: a policy that sometimes succeeds when sampled, with
      room left for RL;
    - temperature 0.8, replies cut at the end of the action: diverse groups without the junk a
      small model samples at 1.0; SFT's loss is taken at the same temperature;
    - 16 updates of 2 tasks x 8 rollouts (16 episodes generated together) at learning rate 3e-4
      (1e-3 collapsed into "go to" loops);
    - a KL to the policy after SFT, weight 0.1: without it RL collapsed at one SFT seed of three,
      its greedy replies dropping the objects' numbers;
    - advantages not divided by their group's spread (``scale: false``): with the spread, a
      group whose members all failed turned a 0.2 difference in return (one more rejected
      command) into an advantage as large as a success's;
    - compute: bfloat16 where the CPU has it, adapters on the top 10 of 30 layers (backward stops
      there, and the update starts from the bottom 20 layers' output that the rollout kept), each
      task's prompt head encoded once per micro-batch; the admissible actions are
      listed by the prompt (one per line) rather than by the env (one long line).
    """
    procs = processes(args)
    return [
        f"run_dir={args.run_dir}",
        f"seed={args.seed}",
        "resume=false",
        "checkpoint_every=0",
        f"env.id={ENV_ID}",
        f"env.eval_split={args.eval_split}",
        "env.backend=inline",
        f"env.num_envs={args.num_envs or eval_episodes(args)}",
        f"env.max_turns={args.max_turns}",
        f"env.kwargs={{shaped_reward: {args.shaped_reward}, invalid_action_penalty: {args.invalid_penalty}, "
        "admissible_in_observation: false}",
        f"model.name={args.model}",
        f"model.dtype={args.dtype}",
        "model.lora=true",
        "model.lora_rank=16",
        "model.lora_alpha=32",
        "model.lora_layers=10",
        "generation.max_new_tokens=16",
        f"generation.temperature={args.temperature}",
        "generation.eval_temperature=0",
        # the goal stays in the first message and only the last turn is shown, which keeps prompts
        # near 300 tokens (on CPU, prompt tokens are most of the cost of training)
        "prompt.history=last_k",
        "prompt.history_k=1",
        "prompt.show_admissible=true",
        f"prompt.system_prompt={SYSTEM_PROMPT}",
        f"sft.episodes={args.sft_episodes}",
        "sft.epochs=2",
        "sft.lr=1e-3",
        "sft.batch_size=8",
        "sft.micro_batch_size=8",
        f"rl.updates={args.updates}",
        "rl.estimator=gigpo",
        "rl.estimator_args={scale: false}",
        # per process: with --processes N each collects tasks/N groups and takes minibatches of 32/N turns
        f"rl.tasks_per_update={args.tasks_per_update // procs}",
        f"rl.group_size={args.group_size}",
        f"rl.lr={args.lr}",
        f"rl.minibatch_size={32 // procs}",
        f"rl.micro_batch_size={32 // procs}",
        f"rl.kl_coef={args.kl}",
        f"eval.episodes={eval_episodes(args)}",
        f"eval.curve_episodes={args.curve_episodes}",
        f"eval.every={eval_every(args)}",
        "eval.at_start=true",
        f"eval.zero_shot={str(args.zero_shot).lower()}",
        f"progress={'false' if args.no_progress else 'true'}",
        *args.set,
    ]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", default="runs/demo", help="output folder (default: runs/demo)")
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m (default) or tiny (a smoke test)")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16"),
        help="weights and compute dtype (auto: bfloat16 where the CPU computes it natively, "
        "AVX512-BF16 or AMX, else float32)",
    )
    p.add_argument("--updates", type=int, default=UPDATES, help=f"GiGPO updates (default: {UPDATES})")
    p.add_argument("--group-size", type=int, default=8, help="rollouts per task in a GiGPO group (default: 8)")
    p.add_argument("--tasks-per-update", type=int, default=2, help="tasks per update (default: 2)")
    p.add_argument("--lr", type=float, default=LR, help=f"RL learning rate (LoRA; default: {LR:g})")
    p.add_argument(
        "--kl",
        type=float,
        default=KL,
        help=f"weight of the KL to the policy after SFT (default: {KL:g}; 0: none)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        help="sampling temperature of training rollouts and of SFT's loss (default: 0.8)",
    )
    p.add_argument(
        "--shaped-reward",
        type=float,
        default=0.5,
        help="weight of the env's progress reward (default: 0.5; 0 = success only)",
    )
    p.add_argument(
        "--invalid-penalty",
        type=float,
        default=0.1,
        help="reward subtracted for a command the env rejects (default: 0.1)",
    )
    p.add_argument("--sft-episodes", type=int, default=32, help="expert episodes to imitate (default: 32)")
    _add_evaluation_arguments(p)
    _add_machine_arguments(p)


def _add_evaluation_arguments(p: argparse.ArgumentParser) -> None:
    """Which held-out split, how many episodes, how often."""
    p.add_argument(
        "--eval-split",
        default="test",
        choices=tuple(EVAL_TASKS),
        help=f"held-out split the result is reported on (default: test, the sealed test split, "
        f"{EVAL_TASKS['test']} tasks on its 24 floor plans); choose settings on the validation "
        "splits valid_seen and valid_unseen, never on the test split",
    )
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        help="held-out episodes of the evaluations after SFT and after RL (default: 0, every task of "
        "the split, one episode each)",
    )
    p.add_argument(
        "--curve-episodes",
        type=int,
        default=CURVE_EPISODES,
        help="episodes of the evaluations during RL, the first tasks of the same list "
        f"(default: {CURVE_EPISODES}; 0: as many as --eval-episodes)",
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="evaluate every N updates (default: 0, a quarter of --updates: 4 points during RL)",
    )
    p.add_argument("--zero-shot", action="store_true", help="also evaluate the model before SFT")


def _add_machine_arguments(p: argparse.ArgumentParser) -> None:
    """The turn limit and seed, how the run uses the machine (batches, threads, processes), what it
    prints, and any other config field."""
    p.add_argument(
        "--num-envs",
        type=int,
        default=0,
        help="episodes run (and generated for) together (default: 0, every evaluation episode in one batch)",
    )
    p.add_argument("--max-turns", type=int, default=6, help="turn limit per episode (default: 6; the expert needs 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch CPU threads per process (default 0: the cores shared out between the processes, "
        "at least 1; with --processes 1, torch's choice, one per core)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"data-parallel processes (default: {PROCESSES}; each plays a share of every update's tasks, "
        "of SFT's batches and of every evaluation; --tasks-per-update must be a multiple). On 2 "
        "cores, 2 processes of one thread are faster than one of two threads (docs/benchmarks.md); the number "
        "changes the random streams, so results are reproduced at the same number",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--show-config", action="store_true", help="print the training config and exit")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any other training config field, as in `turngym train` (repeatable), e.g. --set sft.epochs=2",
    )


def parse(argv: list[str]) -> argparse.Namespace:
    """The demo's arguments from a list (the benchmarks build their runs on the demo's settings)."""
    parser = argparse.ArgumentParser(prog="turngym demo")
    add_arguments(parser)
    return parser.parse_args(argv)


def processes(args) -> int:
    n = args.processes
    if n < 1 or args.tasks_per_update % n or 32 % n:
        raise ValueError(
            f"--processes: {n}; allowed: a divisor of --tasks-per-update ({args.tasks_per_update}) "
            "and of the minibatch of 32 turns"
        )
    return n


def eval_episodes(args) -> int:
    return args.eval_episodes or EVAL_TASKS[args.eval_split]


def eval_every(args) -> int:
    return args.eval_every or max(1, args.updates // 4)


def run(args) -> int:
    from turngym.trainers.config import dump_yaml, load_config

    cfg = load_config(None, demo_overrides(args))
    if args.show_config:
        print(dump_yaml(cfg), end="")
        return 0
    procs = processes(args)
    if procs > 1 and "WORLD_SIZE" not in os.environ:
        return launch(args)
    import torch

    from turngym.core.commands import format_table
    from turngym.core.runs import read_metrics
    from turngym.trainers.loop import train

    if args.threads or procs > 1:
        torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // procs))
    if torch.cuda.is_available():
        cfg.model.device = "cpu"  # the demo is the CPU run; `turngym train` uses a GPU when there is one
    if int(os.environ.get("RANK", "0")) > 0:  # another process of --processes: rank 0 reports
        train(cfg, log=lambda line: None)
        return 0
    n = cfg.eval.episodes
    print(
        f"turngym demo (seed {args.seed}): {args.model} on {ENV_ID}: SFT on {args.sft_episodes} expert "
        f"episodes -> {args.updates} GiGPO updates; held-out: {args.eval_split}, {n} episodes after SFT and "
        f"after RL, {cfg.eval.curve_episodes or n} every {cfg.eval.every} updates; writing {cfg.run_dir}/",
        flush=True,
    )
    print(f"compute: {dtype_line(args.dtype)}", flush=True)
    start = time.perf_counter()
    train(cfg, log=lambda line: print(f"  {line}", flush=True))
    minutes = (time.perf_counter() - start) / 60
    rows = read_metrics(f"{cfg.run_dir}/metrics.jsonl")
    first, last = rows[0], rows[-1]
    table = []
    if args.zero_shot:
        table.append(stage_row("zero-shot", first, "eval/", n))
    table.append(stage_row(f"after SFT ({first.get('sft/turns', 0)} expert turns)", first, "eval_after_sft/", n))
    if last.get("update"):  # with --updates 0 the last row is the first: there is no RL row
        table.append(stage_row(f"after SFT + {last['update']} GiGPO updates", last, "eval/", n))
    print()
    print(f"Held-out tasks ({ENV_ID}, {args.eval_split}, {n} episodes, greedy; 95% Wilson intervals):")
    print(format_table(table, ["policy", "success_rate", "95% CI", "mean_return", "mean_steps"]))
    curve = [
        (r["update"], r["eval/success_rate"], r.get("eval/episodes"))
        for r in rows
        if r.get("update") and "eval/success_rate" in r
    ]
    if curve:
        print(
            "\nheld-out success during RL: "
            + ", ".join(f"update {u}: {rate:.2f} ({episodes} ep.)" for u, rate, episodes in curve)
        )
    if last.get("update"):
        # the evaluation after SFT (update 0) and the last one play the same episodes
        pair = paired_outcomes(
            f"{cfg.run_dir}/eval/update_0000.jsonl", f"{cfg.run_dir}/eval/update_{last['update']:04d}.jsonl"
        )
        print(verdict(table[-2], table[-1], pair))
    else:
        print("No RL updates were run (--updates 0).")
    print()
    print(f"learning curves: {cfg.run_dir}/curves.png   metrics: {cfg.run_dir}/metrics.jsonl   total {minutes:.1f} min")
    print(f"report: {cfg.run_dir}/report.html   (browse the episodes: turngym view {cfg.run_dir})")
    env_kwargs = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in cfg.env.kwargs.items())
    print(
        f"trained policy: {cfg.run_dir}/model   (its held-out evaluation again: turngym eval {cfg.env.id} "
        f"--policy hf:{cfg.run_dir}/model --split {cfg.env.eval_split} --episodes {n} --max-turns {cfg.env.max_turns} "
        f"--env-kwargs {env_kwargs} --model-kwargs temperature=0,batch_size={cfg.env.num_envs} "
        f"--num-envs {cfg.env.num_envs} --backend inline)"
    )
    return 0


def dtype_line(dtype: str) -> str:
    """The dtype this run computes in, and why: the demo's settings and minutes were measured in
    bfloat16; a CPU without native bfloat16 runs it in float32 (docs/benchmarks.md, `make demo`)."""
    from turngym.agents.models import native_dtype

    if dtype != "auto":
        return f"{dtype} (--dtype)"
    if native_dtype("cpu") == "bfloat16":
        return "bfloat16 (this CPU computes it natively)"
    return (
        "float32: this CPU has no native bfloat16 (AVX512-BF16 or AMX); the demo's settings and minutes were "
        "measured in bfloat16, and float32 takes longer and rounds differently (docs/benchmarks.md has its runs)"
    )


def launch(args) -> int:
    """Run the demo of ``args`` as ``args.processes`` processes under torch's launcher
    (``torchrun --standalone``); rank 0 prints. On 2 cores two single-thread processes run the
    demo faster than one process of two threads (docs/benchmarks.md)."""
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(args.processes),
        "-m",
        "turngym",
        "demo",
        *to_argv(args),
    ]
    return subprocess.run(command, env=env).returncode


def to_argv(args) -> list[str]:
    """The command-line arguments that parse back to ``args`` (they may not have come from sys.argv)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or value is None or value == action.default:
            continue
        if action.nargs == 0:  # a flag (store_true)
            argv.append(action.option_strings[0])
        elif isinstance(value, list):
            argv += [x for v in value for x in (action.option_strings[0], str(v))]
        else:
            argv += [action.option_strings[0], str(value)]
    return argv


def target_met(gained: int, lost: int, paired: int) -> bool:
    """The demo's target: RL beats SFT by ``TARGET_GAIN`` over ``paired`` episodes, paired exact p < 0.05."""
    return (gained - lost) / paired >= TARGET_GAIN and sign_test(gained, lost) < 0.05


def verdict(after_sft: dict, after_rl: dict, pair: tuple[int, int, int] | None) -> str:
    """Plain sentences: did RL beat SFT by the demo's target (+0.10, paired exact p < 0.05)?"""
    a, b = after_sft.get("success_rate"), after_rl.get("success_rate")
    if not isinstance(a, float) or not isinstance(b, float) or pair is None:
        return "No comparison: an evaluation is missing or the two evaluations played different episodes."
    gained, lost, paired = pair
    p = sign_test(gained, lost)
    change = (gained - lost) / paired
    lines = [
        f"Task by task (the same {paired} episodes): RL solved {gained} that SFT failed and failed {lost} "
        f"that SFT solved: {a:.2f} -> {b:.2f}, {change:+.2f} (exact sign test on the {gained + lost} changed "
        f"episodes: p = {p:.3g})."
    ]
    met = target_met(gained, lost, paired)
    if met:
        lines.append(f"RL beat SFT by at least {TARGET_GAIN:+.2f}, beyond noise (p < 0.05): the demo's target is met.")
    elif change > 0 and p < 0.05:
        lines.append(f"RL beat SFT beyond noise (p < 0.05), but by less than the demo's target of {TARGET_GAIN:+.2f}.")
    elif change > 0:
        lines.append(
            f"RL gained {change:+.2f}, but that is not beyond noise (p >= 0.05): this seed falls short of "
            f"the demo's target ({TARGET_GAIN:+.2f} at p < 0.05)."
        )
    elif change < 0 and p < 0.05:
        lines.append(
            "RL made the agent worse than SFT, beyond noise (p < 0.05): this seed falls far short of the "
            f"demo's target ({TARGET_GAIN:+.2f} at p < 0.05)."
        )
    else:
        lines.append(
            "RL did not improve on SFT in this run: this seed falls short of the demo's target "
            f"({TARGET_GAIN:+.2f} at p < 0.05)."
        )
    changed = (gained + lost) / paired
    if not met and changed >= TARGET_GAIN:
        # how decisive a miss is: one run of this size misses a real gain of the target's size often
        lines.append(
            f"(With {changed:.0%} of the episodes changing outcome, RL that truly gains {TARGET_GAIN:+.2f} "
            f"passes this test in {sign_test_power(paired, changed, TARGET_GAIN):.0%} of runs.)"
        )
    return "\n".join(lines)


def stage_row(name: str, row: dict, prefix: str, n: int) -> dict:
    out = {
        "policy": name,
        **{k: row.get(f"{prefix}{k}", "-") for k in ("success_rate", "mean_return", "mean_steps")},
    }
    episodes = row.get(f"{prefix}episodes", n)
    if isinstance(out["success_rate"], float):
        low, high = wilson(out["success_rate"] * episodes, episodes)
        out["95% CI"] = f"[{low:.2f}, {high:.2f}]"
    return out
