"""Break the trainer one bug at a time and show which test catches each.

    nice -n 19 .venv/bin/python benchmarks/must_learn_mutants.py [MUTANT ...]

Each mutant is injected with monkeypatch (the trainer's files are untouched), then this runs:
the one-turn and the multi-turn must-learn checks of tests/trainers/test_must_learn.py (their learning
and first-minibatch-ratio assertions, as functions that report instead of assert) and the
sharp unit tests of tests/trainers/test_losses.py. The table says FAIL where a check caught the bug;
the "none" row must pass everywhere. About 40 s a row on a quiet core.

Mutants:
- shifted loss mask: the mask one column later than the log-probs it weights (the first reply
  token leaves the loss, a padding column joins it);
- flipped advantage: every token's advantage negated;
- advantage of the next turn: turn t's tokens get turn t+1's advantage (the last turn the first's);
- log-probs one token off: the sampler records token k+1's log-prob for token k (wrapping);
- inverted clip: max instead of min in the clipped surrogate.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "support"), str(TESTS / "trainers")]  # the helpers, and the test modules it reuses

import test_losses  # noqa: E402
import test_must_learn as must  # noqa: E402

from turngym.trainers import learn, losses, samples, update  # noqa: E402


def shifted_mask(mp):
    real = update.score

    def score(tr, prompts, completions, *, with_grad, **kwargs):
        out = real(tr, prompts, completions, with_grad=with_grad, **kwargs)
        if not with_grad:
            return out
        mask = torch.zeros_like(out.mask)
        mask[:, 1:] = out.mask[:, :-1]
        return dataclasses.replace(out, mask=mask)

    mp.setattr(update, "score", score)


def flipped_advantage(mp):
    real = samples.token_advantages
    mp.setattr(samples, "token_advantages", lambda *args: [-a for a in real(*args)])


def next_turns_advantage(mp):
    real = samples.token_advantages

    def token_advantages(tr, step, a, out, i, j):
        turns = out.step[i]
        return real(tr, step, float(turns[(j + 1) % len(turns)]), out, i, j)

    mp.setattr(samples, "token_advantages", token_advantages)


def logprobs_one_token_off(mp):
    real = learn.collect

    def collect(*args, **kwargs):
        trajectories = real(*args, **kwargs)
        for t in trajectories:
            for s in t.steps:
                s.logprobs = s.logprobs[1:] + s.logprobs[:1]
        return trajectories

    mp.setattr(learn, "collect", collect)


def inverted_clip(mp):
    def clipped_policy_loss(
        logprobs, old_logprobs, advantages, mask, num_tokens, clip_low=0.2, clip_high=0.28, weights=None
    ):
        ratio = torch.exp(logprobs - old_logprobs)
        unclipped = ratio * advantages
        clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
        per_token = -torch.maximum(unclipped, clipped)  # the bug: max, not min
        if weights is not None:
            per_token = per_token * weights
        clip_frac = ((clipped < unclipped).float() * mask).sum() / num_tokens
        return (per_token * mask).sum() / num_tokens, clip_frac.detach()

    mp.setattr(losses, "clipped_policy_loss", clipped_policy_loss)
    mp.setattr(update, "clipped_policy_loss", clipped_policy_loss)


MUTANTS = {
    "none": lambda mp: None,
    "shifted loss mask": shifted_mask,
    "flipped advantage": flipped_advantage,
    "advantage of the next turn": next_turns_advantage,
    "log-probs one token off": logprobs_one_token_off,
    "inverted clip": inverted_clip,
}
UNIT_TESTS = {
    "clip unit": test_losses.test_clipped_surrogate_gradient_in_each_region,
    "turn-alignment unit": test_losses.test_each_turn_gets_its_own_advantage_on_its_own_tokens,
    "mask unit": test_losses.test_the_update_scores_every_reply_token_and_only_those,
}
COLUMNS = ["one-turn learns", "multi-turn learns", "multi-turn ratio", *UNIT_TESTS]


def final_success(rows) -> str:
    return ",".join(f"{r['train/success_rate']:.2f}" for r in rows[-3:])


def check(name: str, work: Path) -> dict[str, str]:
    cells = {}
    with pytest.MonkeyPatch.context() as mp:
        MUTANTS[name](mp)
        rows = must.run(must.ONE_TURN, work / "one")
        cells["one-turn learns"] = f"{'FAIL' if must.one_turn_failures(rows) else 'pass'} ({final_success(rows)})"
        rows = must.run(must.MULTI_TURN, work / "multi")
        failures = must.multi_turn_failures(rows)
        cells["multi-turn learns"] = f"{'FAIL' if failures['learning'] else 'pass'} ({final_success(rows)})"
        dev = max((r.get("policy/first_ratio_max_dev", 0.0) for r in rows), default=0.0)
        cells["multi-turn ratio"] = f"{'FAIL' if failures['ratio'] else 'pass'} (max dev {dev:.3g})"
        for col, test in UNIT_TESTS.items():
            try:
                test()
                cells[col] = "pass"
            except AssertionError:
                cells[col] = "FAIL"
    return cells


def main(argv: list[str]) -> int:
    names = argv or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        print(f"unknown mutant {unknown[0]!r}; allowed: {', '.join(MUTANTS)}")
        return 2
    torch.set_num_threads(1)
    table = []
    for name in names:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            cells = check(name, Path(work))
        table.append((name, cells))
        print(f"{name}: {cells} ({time.perf_counter() - start:.0f} s)", flush=True)
    print()
    print("| mutant | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for name, cells in table:
        print(f"| {name} | " + " | ".join(cells[c] for c in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
