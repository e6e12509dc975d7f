"""Losses, on completion-aligned token tensors of shape [B, T] (see agents/scoring.py).

``mask`` is 1 on the agent's own tokens and 0 elsewhere (padding; observation and tool-result
tokens never appear in a completion, they live in the prompt). All token losses are
``sum(loss * mask) / num_tokens`` where ``num_tokens`` is the count over the whole minibatch, so
gradient accumulation over micro-batches adds up to exactly the full-batch loss.
"""

from __future__ import annotations

import torch


def clipped_policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                        mask: torch.Tensor, num_tokens: float, clip_low: float = 0.2, clip_high: float = 0.28):
    """Token-level clipped surrogate (PPO/GRPO, asymmetric clip as in DAPO).

        ratio_t = exp(logp_t - logp_old_t)
        L = -sum_t min(ratio_t A_t, clip(ratio_t, 1 - clip_low, 1 + clip_high) A_t) / num_tokens

    Returns (loss, share of tokens where the clip was active).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = (per_token * mask).sum() / num_tokens
    clip_frac = ((clipped < unclipped).float() * mask).sum() / num_tokens
    return loss, clip_frac.detach()


def kl_to_reference(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, num_tokens: float):
    """Unbiased, always-positive KL(pi || pi_ref) estimate per token (Schulman's k3):

        kl_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1
    """
    diff = ref_logprobs - logprobs
    return ((torch.exp(diff) - diff - 1.0) * mask).sum() / num_tokens


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor, num_tokens: float):
    """Negative log-likelihood of the expert's tokens, averaged over tokens."""
    return -(logprobs * mask).sum() / num_tokens


def value_loss(predicted: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor | None = None):
    """0.5 * mean squared error of the value head (optionally weighted per row)."""
    err = 0.5 * (predicted - targets) ** 2
    if weight is None:
        return err.mean()
    return (err * weight).sum() / weight.sum().clamp(min=1.0)
