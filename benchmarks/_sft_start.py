"""The demo's checkpoint after SFT as a starting point, for the benchmarks that measure from it
(``demo_tuning.py``, ``rl_episode_cost.py``, ``freed_memory.py``).

``--sft`` in those scripts is a run folder whose newest checkpoint is the demo's update 0 (after
SFT), made by ``python -m turngym demo --processes 1 --updates 0 --set checkpoint_every=100 --set
eval.at_start=false --run-dir runs/sft0``.
"""

from __future__ import annotations

from pathlib import Path


def sft_checkpoint(sft: str | Path) -> Path:
    """The newest checkpoint under ``sft``; exits with one line when there is none."""
    from turngym.trainers import checkpoint as ckpt

    last = ckpt.latest_checkpoint(Path(sft))
    if last is None:
        raise SystemExit(f"--sft: no checkpoint under {sft}/checkpoints (see the script's docstring)")
    return last


def trainer_at_sft(cfg, sft: str | Path):
    """(trainer built from ``cfg`` with the SFT weights and RNG streams loaded, the checkpoint's
    loop state as a dict)."""
    from turngym.trainers import checkpoint as ckpt
    from turngym.trainers.setup import build_trainer

    tr = build_trainer(cfg, log=lambda _: None)
    return tr, ckpt.load_checkpoint(sft_checkpoint(sft), tr.modules, None, tr.np_rng)


def inline_pool(cfg):
    from turngym.core.pool import EnvPool

    return EnvPool(cfg.env.id, num_envs=cfg.env.num_envs, backend="inline", env_kwargs=dict(cfg.env.kwargs))


def evaluate_sft(cfg, sft: str | Path, episodes: int | None = None) -> dict:
    """The SFT checkpoint's greedy evaluation on the first ``episodes`` held-out tasks of ``cfg``
    (default ``eval.episodes``), written to ``run_dir/eval/update_0000.jsonl``; its metrics row."""
    from turngym.trainers.loop import evaluate
    from turngym.trainers.setup import run_task_ids

    tr, _ = trainer_at_sft(cfg, sft)
    pool = inline_pool(cfg)
    try:
        return evaluate(tr, pool, run_task_ids(cfg)[1], 0, episodes=episodes)
    finally:
        pool.close()
