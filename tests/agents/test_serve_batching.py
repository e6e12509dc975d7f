"""serve-policy's batcher: requests sent at once share one generate call even when they reach
the server tens of milliseconds apart, and a lone request is not held back."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from turngym.agents.serve_batcher import GATHER_GAP_S, Batcher  # noqa: E402


class Recorder:
    """A stand-in for HFPolicy.generate: records each call's rows, answers every prompt."""

    def __init__(self):
        self.calls: list[list] = []

    def generate(self, prompts, **options):
        self.calls.append(list(prompts))
        return [f"reply to {p}" for p in prompts]


@pytest.fixture
def batcher():
    b = Batcher(Recorder(), max_rows=8)
    yield b
    b.close()


def test_requests_arriving_apart_within_the_gap_share_a_batch(batcher):
    futures = []
    for i in range(4):  # 20 ms apart: the spread seen on a busy 2-core machine
        futures.append(batcher.submit([[i]], {"temperature": 1.0}))
        time.sleep(0.02)
    assert [f.result(timeout=10) for f in futures] == [[f"reply to {[i]}"] for i in range(4)]
    assert batcher.policy.calls == [[[0], [1], [2], [3]]]


def test_a_request_still_being_read_is_waited_for(batcher):
    request = SimpleNamespace(state=SimpleNamespace())
    batcher.arrived(request)  # arrived, not yet tokenized
    first = batcher.submit([[0]], {})

    def finish_later():
        time.sleep(3 * GATHER_GAP_S)  # longer than the gap: only the count keeps the batch open
        batcher.submit([[1]], {})
        batcher.prepared(request)
        batcher.prepared(request)  # idempotent (the middleware calls it again at the end)

    threading.Thread(target=finish_later).start()
    first.result(timeout=10)
    assert batcher.policy.calls == [[[0], [1]]]
    assert batcher.preparing == 0


def test_a_lone_request_waits_only_the_gap_and_options_are_not_mixed(batcher):
    start = time.monotonic()
    batcher.submit([[0]], {"temperature": 1.0}).result(timeout=10)
    assert time.monotonic() - start < 0.4  # the gap (0.05 s), not the longest wait
    a = batcher.submit([[1]], {"temperature": 1.0})
    b = batcher.submit([[2]], {"temperature": 0.0})
    a.result(timeout=10), b.result(timeout=10)
    assert batcher.policy.calls[1:] == [[[1]], [[2]]]
