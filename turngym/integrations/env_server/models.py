"""The env server's request bodies (pydantic models: FastAPI validates and documents them)."""

# No ``from __future__ import annotations``: pydantic reads the annotations at run time.
from typing import Any

from pydantic import BaseModel, Field, StrictInt

MAX_BATCH_OPS = 4096  # a /batch with more ops answers 400 (each op may start an env call)


class CreateRequest(BaseModel):
    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    snapshot_id: str | None = Field(default=None, description="open the session in this kept snapshot's state")


class ResetRequest(BaseModel):
    seed: StrictInt | None = None  # strict: ``true`` is not seed 1
    options: dict[str, Any] | None = None


class StepRequest(BaseModel):
    action: str


class BatchOp(BaseModel):
    op: str = Field(description="create | reset | step | expert_step | close | describe | snapshot | fork")
    session_id: str | None = None
    env_id: str | None = None
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    snapshot_id: str | None = None
    seed: StrictInt | None = None
    options: dict[str, Any] | None = None
    action: str | None = None
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "this op's own deadline in seconds (reset, step, expert_step), at most the server's step timeout: "
            "past it the env is killed and the op answers 504 (EnvPool's remote backend sends its own)"
        ),
    )


class BatchRequest(BaseModel):
    ops: list[BatchOp] = Field(max_length=MAX_BATCH_OPS)
