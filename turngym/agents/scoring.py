"""Score recorded completions with a model: the per-token log-probs and entropies a trainer needs.

This is the one function a trainer calls to score what ``HFPolicy`` generated. It lays the
batch out exactly as generation did (prompts padded on the left, completions appended and
padded on the right, position ids counted from the first real token), so the log-probs it
returns for unchanged weights match ``Completion.logprobs`` up to float rounding.

For a completion token ``y_t`` after context ``x, y_<t``::

    logprob_t = log softmax(z_t / T)[y_t]
    entropy_t = -sum_v p_v log p_v,   p = softmax(z_t / T)

where ``z_t`` are the model's logits and ``T`` the sampling temperature (pass the policy's
``temperature`` so the ratio pi_new / pi_old compares the same distributions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class TokenScores:
    """Completion-aligned scores, right-padded to the longest completion: shape ``[B, T]``.

    ``mask`` is 1.0 on real completion tokens, 0.0 on padding. Row ``i`` column ``t`` scores
    ``completion_ids[i][t]``.
    """

    logprobs: torch.Tensor
    entropies: torch.Tensor
    mask: torch.Tensor

    def to_lists(self) -> tuple[list[list[float]], list[list[float]]]:
        lengths = self.mask.sum(-1).long().tolist()
        lp = self.logprobs.detach().float().cpu().tolist()
        ent = self.entropies.detach().float().cpu().tolist()
        return [r[:n] for r, n in zip(lp, lengths)], [r[:n] for r, n in zip(ent, lengths)]


def score_completions(model, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                      *, temperature: float = 1.0, with_grad: bool = False, pad_id: int = 0,
                      compute_entropy: bool = True) -> TokenScores:
    """Per-token log-probs (and entropies) of ``completion_ids[i]`` given ``prompt_ids[i]``.

    Args:
        model: a transformers causal LM (e.g. ``HFPolicy.model``; LoRA-wrapped models work too).
        prompt_ids, completion_ids: token id lists, as recorded in ``Completion``/``Step``.
        temperature: divide logits by this before the softmax (use the sampling temperature;
            greedy generation was recorded at temperature 1).
        with_grad: keep the autograd graph (for the loss); otherwise run under no_grad.
        pad_id: filler id for padding (masked out, never scored).
        compute_entropy: skip the entropy (saves one softmax-sized buffer) when False.

    Returns:
        ``TokenScores`` with ``[B, max_completion_len]`` tensors on the model's device.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(f"prompt_ids has {len(prompt_ids)} rows but completion_ids has {len(completion_ids)}")
    if not prompt_ids:
        raise ValueError("score_completions needs at least one (prompt, completion) pair")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token (the first completion token is scored "
                         "from the prompt's last position)")
    if temperature <= 0:
        temperature = 1.0  # greedy decoding: score the model's own distribution
    device = next(model.parameters()).device
    batch = len(prompt_ids)
    max_prompt = max(len(p) for p in prompt_ids)
    max_completion = max(len(c) for c in completion_ids)
    width = max_prompt + max_completion
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        start = max_prompt - len(p)  # left-pad the prompt, completion starts at column max_prompt
        row = list(p) + list(c)
        input_ids[i, start:start + len(row)] = torch.tensor(row, dtype=torch.long)
        attention[i, start:start + len(row)] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    input_ids, attention, position_ids = input_ids.to(device), attention.to(device), position_ids.to(device)
    mask = torch.zeros((batch, max_completion), dtype=torch.float32, device=device)
    for i, c in enumerate(completion_ids):
        mask[i, :len(c)] = 1.0
    if max_completion == 0:
        empty = torch.zeros((batch, 0), device=device)
        return TokenScores(empty, empty.clone(), mask)

    with torch.set_grad_enabled(with_grad):
        # Only the positions that predict completion tokens need logits: columns
        # max_prompt-1 .. width-2 predict columns max_prompt .. width-1.
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids,
                    logits_to_keep=max_completion + 1, use_cache=False)
        logits = out.logits[:, :-1, :].float() / temperature
        log_probs = torch.log_softmax(logits, dim=-1)
        targets = input_ids[:, max_prompt:]
        token_logprobs = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        if compute_entropy:
            entropies = -(log_probs.exp() * log_probs).sum(-1)
        else:
            entropies = torch.zeros_like(token_logprobs)
    return TokenScores(token_logprobs * mask, entropies * mask, mask)
