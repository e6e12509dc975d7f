"""The key/value cache that outlives a generate call: the attention keys/values of recent token
sequences, and each new prompt's longest cached prefix (see generation.py for how it is used)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from turngym.agents.engine.decode_step import KV


class PrefixCache:
    """Key/value caches of recent token sequences, looked up by longest common prefix.

    ``max_tokens`` bounds the tokens held over all entries (least recently used go first); an
    entry that is a prefix of a newly stored one is dropped, since the new one covers it.
    ``HFPolicy.generate`` raises the bound to its call's rows (``reserve``): below that, eviction
    drops rows of the batch that needs them at its next turn.
    """

    def __init__(self, max_tokens: int = 32768):
        self.limit = self.max_tokens = int(max_tokens)
        self._entries: OrderedDict[int, tuple[np.ndarray, KV]] = OrderedDict()
        self._next = 0
        self.hits = self.lookups = self.reused_tokens = 0
        #: prompt positions the model computed (each distinct prompt's uncached suffix), counted
        #: by generation's prefill: what prefix sharing saves shows here
        self.computed_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids, _ in self._entries.values())

    def clear(self) -> None:
        self._entries.clear()

    def lookup(self, ids: Sequence[int]) -> tuple[int, KV | None]:
        """(n, kv): the longest cached prefix of ``ids`` (n tokens) and its keys/values (views)."""
        self.lookups += 1
        if not self._entries or not ids:
            return 0, None
        query = np.asarray(ids, dtype=np.int64)
        best, best_key = 0, None
        for key, (stored, _) in self._entries.items():
            n = min(len(stored), len(query))
            if n <= best:
                continue
            same = stored[:n] == query[:n]
            common = n if same.all() else int(np.argmin(same))
            if common > best:
                best, best_key = common, key
        if best_key is None:
            return 0, None
        self._entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in self._entries[best_key][1]]

    def reserve(self, tokens: int) -> None:
        """Hold at least ``tokens`` (a call's prompts and replies), or the limit if more.

        Episodes come back turn after turn in the same order, and least-recently-used eviction
        of a working set larger than the cache misses on every row past it: 134 rows of the
        demo's prompts (about 38,000 tokens) against 32,768 re-encoded a share of their heads
        each turn. A disabled cache (limit 0) stays off."""
        self.max_tokens = max(self.limit, int(tokens)) if self.limit > 0 else 0

    def store(self, ids: Sequence[int], kv: KV) -> None:
        if self.max_tokens <= 0 or not ids or len(ids) > self.max_tokens:
            return
        stored = np.asarray(ids, dtype=np.int64)
        for key in [
            k
            for k, (old, _) in self._entries.items()
            if len(old) <= len(stored) and np.array_equal(old, stored[: len(old)])
        ]:
            del self._entries[key]
        self._entries[self._next] = (stored, kv)
        self._next += 1
        total = self.tokens
        while total > self.max_tokens and len(self._entries) > 1:
            _, (old, _) = self._entries.popitem(last=False)
            total -= len(old)


# ----- transformers' cache object ------------------------------------------------------------
