"""serve-policy's generation loop: concurrent requests with equal sampling options are gathered into
one ``generate`` call while more keep arriving (within ``GATHER_GAP_S`` of the last, or still being
read and tokenized), for at most ``GATHER_MAX_S``."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

#: a batch keeps gathering while each request arrives within this many seconds of the last
#: (requests a client sends at once reach the server 10-30 ms apart on a busy 2-core machine)
GATHER_GAP_S = 0.05
#: ... and never for longer than this, counted from its first request
GATHER_MAX_S = 0.5


class Batcher:
    """The one loop that runs generation (``run``); requests with equal options share a batch.
    It runs on a thread of its own, or, with ``thread=False``, wherever ``run`` is called.

    ``preparing`` counts requests that arrived but are not submitted yet (body read, chat
    template, tokenizer): a batch waits for them too, since they are already on their way."""

    def __init__(
        self,
        policy,
        max_rows: int,
        gap_s: float = GATHER_GAP_S,
        max_wait_s: float = GATHER_MAX_S,
        thread: bool = True,
    ):
        self.policy, self.max_rows, self.gap_s, self.max_wait_s = policy, max_rows, gap_s, max_wait_s
        self.queue: queue.Queue = queue.Queue()
        self.preparing = 0  # changed only on the event loop's thread; read here
        if thread:
            threading.Thread(target=self.run, name="serve-policy-generate", daemon=True).start()

    def arrived(self, request) -> None:
        """A request that will be submitted has arrived (paired with ``prepared``)."""
        request.state.preparing = True
        self.preparing += 1

    def prepared(self, request) -> None:
        """The request was submitted, or answered without generating; idempotent."""
        if getattr(request.state, "preparing", False):
            request.state.preparing = False
            self.preparing -= 1

    def submit(self, prompts: list[list[int]], options: dict[str, Any]) -> Future:
        future: Future = Future()
        self.queue.put((prompts, options, future))
        return future

    def close(self) -> None:
        self.queue.put(None)

    def run(self) -> None:
        import torch

        held: list = []  # requests taken from the queue whose options differed from the batch's
        while True:
            first = held.pop(0) if held else self.queue.get()
            if first is None:
                return
            batch, rows = [first], len(first[0])
            last = time.monotonic()
            give_up = last + self.max_wait_s
            while rows < self.max_rows:
                now = time.monotonic()
                if now >= give_up:
                    break
                if self.preparing > 0:  # one is on its way: look again soon
                    timeout = min(0.01, give_up - now)
                elif now - last >= self.gap_s:
                    break
                else:
                    timeout = min(last + self.gap_s, give_up) - now
                try:
                    item = self.queue.get(timeout=timeout)
                except queue.Empty:
                    continue
                last = time.monotonic()
                if item is None:
                    held.append(None)
                    break
                if item[1] == first[1] and rows + len(item[0]) <= self.max_rows:
                    batch.append(item)
                    rows += len(item[0])
                else:
                    held.append(item)
            batch = [item for item in batch if item[2].set_running_or_notify_cancel()]  # callers gone
            if not batch:
                continue
            options = dict(first[1])
            seed = options.pop("seed", None)
            try:
                if seed is not None:
                    torch.manual_seed(seed)
                generations = self.policy.generate([p for item in batch for p in item[0]], **options)
            except Exception as e:  # answer every waiting request, keep serving
                for item in batch:
                    item[2].set_exception(e)
                continue
            start = 0
            for prompts, _, future in batch:
                future.set_result(generations[start : start + len(prompts)])
                start += len(prompts)
