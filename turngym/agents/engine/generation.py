"""Token generation for HFPolicy: batched sampling with a key/value cache that outlives the call.

A multi-turn episode only grows: turn t+1's prompt is turn t's prompt, its reply, and the new
observation. Re-encoding the whole conversation every turn makes a 50-turn episode quadratic,
so ``PrefixCache`` keeps the attention keys/values of recent sequences and each new prompt
starts from the longest cached prefix it shares with any of them:

- the same episode's previous turn (everything but the new observation is cached);
- a sibling of its group (identical first prompt: prefilled once, then shared);
- any episode of the same env (the system prompt and instructions are a common prefix).

``generate`` prefills every prompt's uncached suffix in batched forward passes, rows of similar
suffix length together (cached prefixes and suffixes padded, the gaps masked), then decodes all
rows together, one token per step,
left-padding the caches to a common width; rows that finish leave the batch at once. Keys are
cached after rotary embedding at their true positions, and padding is masked, so a row's logits
equal a fresh full forward pass up to float rounding.

With ``keep_layer=N`` each row also returns the N-th decoder layer's output at every position it
fed through the model (its prompt and every generated token but the last): the input of the
layers above N. While the bottom N layers are frozen (LoRA on the top layers) those states are
what any later pass over the same tokens computes there, so the trainer runs only the layers
above them (``scoring.score_completions(states=...)``). They travel with the keys/values as one
more "layer" of the cache, its keys shaped ``[batch, 1, tokens, hidden]`` and its values an
empty view of them (so they are copied once), and the prefix cache, the padding and the row
selection below carry them unchanged.

Sampling happens here (not in ``model.generate``) so each token's log-prob and entropy come
from the very logits it was drawn from, and stopping is per row: an end-of-turn token, a stop
string, or a caller's ``stop_when(text)`` (the end of an action).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from turngym.agents.engine import base_model
from turngym.agents.engine.decode_step import KV, llama_decode_step
from turngym.agents.engine.prefix_cache import PrefixCache

PAD_SLACK = 0.25  # padding a prefill chunk may add, as a share of its real tokens


@dataclass
class RowResult:
    """One row's generated tokens with the statistics of the distribution each was drawn from."""

    tokens: list[int]
    logprobs: list[float]
    entropies: list[float]
    finish_reason: str  # "stop" or "length"
    ended_with_eos: bool
    stop_hit: tuple[int, str] | None  # (character position, stop string) when a stop string ended it
    states: torch.Tensor | None = None  # [prompt + tokens - 1, hidden], with keep_layer (see the module docstring)


def to_layers(cache) -> KV:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]  # legacy tuples


def from_layers(kv: KV):
    from transformers import DynamicCache

    cache = DynamicCache()
    for i, (k, v) in enumerate(kv):
        cache.update(k, v, i)
    return cache


def forward_with_cache(model, cache, all_logits: bool = False, **kwargs):
    """model(...) with a key/value cache -> (logits of the last position, or of every kept
    position with ``all_logits``; the cache after).

    transformers renamed ``past_key_values`` to ``cache`` (5.2x); pass whichever this one takes.
    """
    base = base_model(model)
    if isinstance(kwargs.get("logits_to_keep"), int) and kwargs["logits_to_keep"] > 0:
        inputs = kwargs["input_ids"] if "input_ids" in kwargs else kwargs["inputs_embeds"]
        kwargs["logits_to_keep"] = keep_last(kwargs["logits_to_keep"], inputs.device)
    name = "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"
    out = model(**kwargs, **{name: cache}, use_cache=True)
    after = getattr(out, "cache", None) if name == "cache" else out.past_key_values
    return (out.logits if all_logits else out.logits[:, -1, :]), after


@contextlib.contextmanager
def layer_output(model, layer: int):
    """Collect the output of decoder layer ``layer`` (1-based; 0 collects nothing) of every
    forward call inside the block, into the yielded list."""
    outputs: list[torch.Tensor] = []
    if not layer:
        yield outputs
        return
    from turngym.agents.engine.frozen_layers import decoder_layers

    handle = decoder_layers(model)[layer - 1].register_forward_hook(
        lambda _module, _inputs, out: outputs.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        yield outputs
    finally:
        handle.remove()


def _with_states(kv: KV, before: torch.Tensor | None, new: torch.Tensor) -> KV:
    """The model's cache ``kv`` with the states "layer" appended: ``before`` [B, 1, T, H] (the
    states of the cached positions, or None) followed by ``new`` [B, n, H]."""
    new = new.unsqueeze(1)
    states = new if before is None else torch.cat([before, new], dim=2)
    return [*kv, (states, states[..., :0])]


def keep_last(n: int, device) -> torch.Tensor:
    """``logits_to_keep`` for the last ``n`` positions, as an index tensor rather than an int.

    With an int, transformers slices the hidden states into a strided view, and torch's CPU
    ``linear`` on a strided 3-D input broadcasts the vocabulary matrix to every row and copies it
    (measured in bfloat16: 1.9 s instead of 0.08 s for 32 rows x 14 positions, 0.83 s instead of
    0.007 s for one position of 16 rows). Indexing gives a contiguous copy of the few kept rows.
    """
    return torch.arange(-n, 0, device=device)


def _row_kv(kv: KV, row: int, start: int, end: int) -> KV:
    # copies: a view would keep the whole batch's tensors alive as long as the entry lives
    return [(k[row : row + 1, :, start:end].clone(), v[row : row + 1, :, start:end].clone()) for k, v in kv]


def _left_pad_stack(rows: list[KV], width: int) -> KV:
    """One batch cache from per-row caches of different lengths, padded on the left to ``width``."""
    out = []
    for layer in range(len(rows[0])):
        keys, values = [], []
        for kv in rows:
            k, v = kv[layer]
            pad = width - k.shape[2]
            if pad:
                k = torch.cat([k.new_zeros(k.shape[0], k.shape[1], pad, k.shape[3]), k], dim=2)
                v = torch.cat([v.new_zeros(v.shape[0], v.shape[1], pad, v.shape[3]), v], dim=2)
            keys.append(k)
            values.append(v)
        out.append((torch.cat(keys, 0), torch.cat(values, 0)))
    return out


# ----- sampling ------------------------------------------------------------------------------


def sample(
    logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, log-probs, entropies) for ``logits`` [B, V].

    The log-probs are the behaviour policy's: those of the distribution the token was drawn
    from, ``softmax(logits / T)`` renormalised over what a top-k/top-p cut kept (T = 1 for
    greedy, ``temperature=0``). Without a cut that is what ``score_completions`` recomputes;
    with one, the trainer scores the uncut policy itself and corrects for the cut with an
    importance weight (``losses.truncated_is_weight``). Entropies are the uncut distribution's.
    """
    logits = logits.float()
    greedy = temperature <= 0
    log_probs = torch.log_softmax(logits if greedy else logits / temperature, dim=-1)
    entropies = -(log_probs.exp() * log_probs).sum(-1)
    if greedy:
        tokens = logits.argmax(-1)
    else:
        cut = log_probs
        if top_k and top_k < cut.shape[-1]:
            kth = cut.topk(top_k, dim=-1).values[:, -1:]
            cut = cut.masked_fill(cut < kth, float("-inf"))
        if top_p < 1.0:
            ordered, order = cut.sort(dim=-1, descending=True)
            probs = ordered.softmax(-1)
            # drop a token when the tokens ranked above it already hold top_p of the mass
            drop = (probs.cumsum(-1) - probs) > top_p
            drop[:, 0] = False
            cut = cut.masked_fill(drop.scatter(1, order, drop), float("-inf"))
        tokens = torch.multinomial(cut.softmax(-1), 1).squeeze(-1)
        if cut is not log_probs:  # what was sampled from: the kept tokens, renormalised
            log_probs = torch.log_softmax(cut, dim=-1)
    return tokens, log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), entropies


# ----- generation ----------------------------------------------------------------------------


def distinct_rows(prompts: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """(the distinct prompts in first-seen order, the index of each row's prompt among them)."""
    index: dict[tuple[int, ...], int] = {}
    owner = [index.setdefault(tuple(p), len(index)) for p in prompts]
    return [list(p) for p in index], owner


@torch.no_grad()
def generate(
    model,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    top_k: int = 0,
    eos_ids: set[int] = frozenset(),
    stop: Sequence[str] = (),
    stop_when: Callable[[str], bool] | None = None,
    decode: Callable[[list[int]], str] | None = None,
    cache: PrefixCache | None = None,
    pad_id: int = 0,
    on_token: Callable[[int], None] | None = None,
    keep_layer: int = 0,
) -> list[RowResult]:
    """Sample one reply per prompt; see the module docstring.

    ``stop`` strings and ``stop_when`` look at ``decode(tokens so far)``; ``cache`` (optional)
    supplies cached prefixes and receives every row's keys/values when the row ends (a cache
    must be used with one ``keep_layer`` throughout: its entries hold the states or not).
    ``on_token(n)`` is called after each decoding step with the number of tokens it produced.
    """
    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    device = next(model.parameters()).device
    checks_text = bool(stop) or stop_when is not None
    if checks_text and decode is None:
        raise ValueError("decode: needed to check stop strings")
    # 1. prefill: rows with the same prompt (group members in the same state) share one
    # encoding; each distinct prompt runs only its uncached suffix
    unique, owner = distinct_rows(prompts)
    first, own_kv = _prefill(model, unique, cache, pad_id, device, keep_layer)
    first_logits = [first[k] for k in owner]
    row_kv = [own_kv[k] for k in owner]
    del own_kv
    lengths = [len(p) for p in prompts]
    width = max(lengths)
    # the decoding steps: a direct step where the model qualifies (see decode_step), else the module stack
    direct = llama_decode_step(model, keep_layer)
    kv = _left_pad_stack(row_kv, width)  # the decoding caches, per layer (+ the states)
    model_kv = (lambda kv: kv[:-1]) if keep_layer else (lambda kv: kv)
    past = None if direct else from_layers(model_kv(kv))  # the module stack's cache object, kept in step
    del row_kv
    attention = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    for i, n in enumerate(lengths):
        attention[i, width - n :] = 1
    logits = torch.cat(first_logits, 0)
    # 2. decode the live rows together
    live = list(range(len(prompts)))  # original row index of each batch row
    positions = torch.tensor(lengths, dtype=torch.long, device=device)
    tokens: list[list[int]] = [[] for _ in prompts]
    logprobs: list[list[float]] = [[] for _ in prompts]
    entropies: list[list[float]] = [[] for _ in prompts]
    results: list[RowResult | None] = [None] * len(prompts)
    for step in range(max_new_tokens):
        chosen, lp, ent = sample(logits, temperature, top_p, top_k)
        chosen_list, lp_list, ent_list = chosen.tolist(), lp.tolist(), ent.tolist()
        keep = []
        for b, row in enumerate(live):
            tok = chosen_list[b]
            tokens[row].append(tok)
            logprobs[row].append(lp_list[b])
            entropies[row].append(ent_list[b])
            finish = _finish(tok, tokens[row], eos_ids, decode if checks_text else None, stop, stop_when)
            if finish is None and step == max_new_tokens - 1:
                finish = ("length", False, None)
            if finish is None:
                keep.append(b)
                continue
            # the states cover what the cache does: the prompt and every generated token but the last
            states = kv[-1][0][b, 0, width - lengths[row] : width + step].clone() if keep_layer else None
            results[row] = RowResult(tokens[row], logprobs[row], entropies[row], *finish, states)
            if cache is not None:
                # the cache covers the prompt and every generated token but the last (not fed yet)
                pad = width - lengths[row]
                cache.store(prompts[row] + tokens[row][:-1], _row_kv(kv, b, pad, width + step))
        if on_token is not None:
            on_token(len(live))
        if not keep:
            break
        if len(keep) < len(live):
            index = torch.tensor(keep, dtype=torch.long, device=device)
            kv = [(k.index_select(0, index), v.index_select(0, index)) for k, v in kv]
            past = None if direct else from_layers(model_kv(kv))
            attention = attention.index_select(0, index)
            positions = positions.index_select(0, index)
            chosen = chosen.index_select(0, index)
            live = [live[b] for b in keep]
        attention = torch.cat([attention, attention.new_ones((len(live), 1))], dim=1)
        logits, kv, past = _step(model, direct, chosen, positions, attention, kv, past, keep_layer)
        positions = positions + 1
    return results


def _finish(
    tok: int,
    row_tokens: list[int],
    eos_ids: set[int],
    decode: Callable[[list[int]], str] | None,
    stop: Sequence[str],
    stop_when: Callable[[str], bool] | None,
) -> tuple[str, bool, str | None] | None:
    """How a row ends with token ``tok`` (the last of ``row_tokens``): (reason, ended on an eos
    token, the stop string hit), or None when it goes on. ``decode`` None: no text checks."""
    if tok in eos_ids:
        return ("stop", True, None)
    if decode is not None:
        text = decode(row_tokens)
        hit = _first_stop(text, stop)
        if hit is not None:
            return ("stop", False, hit)
        if stop_when is not None and stop_when(text):
            return ("stop", False, None)
    return None


def _step(model, direct, chosen, positions, attention, kv, past, keep_layer: int):
    """Feed each live row its chosen token: (next logits, the per-layer caches, the module stack's
    cache object, None with a direct step)."""
    if direct:
        logits, kv = direct(chosen, positions, attention, kv)
        return logits, kv, past
    with layer_output(model, keep_layer) as kept:
        logits, past = forward_with_cache(
            model,
            past,
            input_ids=chosen.unsqueeze(-1),
            attention_mask=attention,
            position_ids=positions.unsqueeze(-1),
        )
    kv = _with_states(to_layers(past), kv[-1][0], kept[0]) if keep_layer else to_layers(past)
    return logits, kv, past


def length_chunks(lengths: Sequence[int], slack: float) -> list[list[int]]:
    """Row indices in chunks of similar length, longest first: a chunk takes the next row while
    its padded area (rows x its longest) stays within ``1 + slack`` of the tokens it holds.

    One padded batch runs every row at the longest row's length; in the demo's evaluations and
    rollouts that padding was 0.6x the real prompt tokens (cache misses next to short suffixes),
    all of it through every linear layer.
    """
    chunks: list[list[int]] = []
    real = 0
    for i in sorted(range(len(lengths)), key=lambda k: -lengths[k]):
        if chunks and (len(chunks[-1]) + 1) * lengths[chunks[-1][0]] <= (1 + slack) * (real + lengths[i]):
            chunks[-1].append(i)
            real += lengths[i]
        else:
            chunks.append([i])
            real = lengths[i]
    return chunks


def _prefill(
    model, prompts: list[list[int]], cache: PrefixCache | None, pad_id: int, device, keep_layer: int
) -> tuple[list[torch.Tensor], list[KV]]:
    """Every prompt's uncached suffix (at least its last token, which gives the first logits),
    in one forward pass per chunk of rows with similar suffix lengths (``length_chunks``).
    Returns each row's first logits [1, V] and its real keys/values."""
    found = [cache.lookup(p) if cache is not None else (0, None) for p in prompts]
    cached = [min(n, len(p) - 1) if kv is not None else 0 for (n, kv), p in zip(found, prompts)]
    if cache is not None:
        cache.computed_tokens += sum(len(p) - n for p, n in zip(prompts, cached))
    first: list[torch.Tensor | None] = [None] * len(prompts)
    row_kv: list[KV | None] = [None] * len(prompts)
    for chunk in length_chunks([len(p) - n for p, n in zip(prompts, cached)], PAD_SLACK):
        logits, kvs = _prefill_rows(
            model,
            [prompts[i] for i in chunk],
            [found[i] for i in chunk],
            [cached[i] for i in chunk],
            pad_id,
            device,
            keep_layer,
        )
        for i, row_logits, kv in zip(chunk, logits, kvs):
            first[i], row_kv[i] = row_logits, kv
    return first, row_kv


def _prefill_rows(
    model,
    prompts: list[list[int]],
    found: list[tuple[int, KV | None]],
    cached: list[int],
    pad_id: int,
    device,
    keep_layer: int,
) -> tuple[list[torch.Tensor], list[KV]]:
    """One forward pass over the rows' uncached suffixes: cached prefixes left-padded to one
    width, suffixes right-aligned after them, the gaps masked."""
    suffixes = [p[n:] for p, n in zip(prompts, cached)]
    past_width, suffix_width = max(cached), max(len(x) for x in suffixes)
    batch = len(prompts)
    ids = torch.full((batch, suffix_width), pad_id, dtype=torch.long)
    positions = torch.zeros((batch, suffix_width), dtype=torch.long)
    mask = torch.zeros((batch, past_width + suffix_width), dtype=torch.long)
    for i, (x, n) in enumerate(zip(suffixes, cached)):
        ids[i, suffix_width - len(x) :] = torch.tensor(x, dtype=torch.long)
        positions[i, suffix_width - len(x) :] = torch.arange(n, n + len(x))
        mask[i, past_width - n : past_width] = 1
        mask[i, past_width + suffix_width - len(x) :] = 1
    past, before = None, None
    if past_width:
        template = next(kv for _, kv in found if kv is not None)
        rows = [
            [(k[:, :, :n], v[:, :, :n]) for k, v in kv]
            if n
            else [
                (k.new_zeros(1, k.shape[1], 0, k.shape[3]), v.new_zeros(1, v.shape[1], 0, v.shape[3]))
                for k, v in template
            ]
            for (_, kv), n in zip(found, cached)
        ]
        stacked = _left_pad_stack(rows, past_width)
        if keep_layer:
            stacked, before = stacked[:-1], stacked[-1][0]
        past = from_layers(stacked)
    with layer_output(model, keep_layer) as kept:
        logits, after = forward_with_cache(
            model,
            past,
            input_ids=ids.to(device),
            position_ids=positions.to(device),
            attention_mask=mask.to(device),
            logits_to_keep=1,
        )
    first_logits = [logits[i : i + 1] for i in range(batch)]
    # each row's real keys/values, contiguous again (decoding below left-pads them to one width)
    layers = _with_states(to_layers(after), before, kept[0]) if keep_layer else to_layers(after)
    row_kv: list[KV] = []
    for i in range(batch):
        real = mask[i].nonzero().squeeze(-1).to(device)
        row_kv.append([(k[i : i + 1].index_select(2, real), v[i : i + 1].index_select(2, real)) for k, v in layers])
    del after, layers
    return first_logits, row_kv


def _first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    found = [(text.find(s), s) for s in stops if s and s in text]
    return min(found) if found else None
