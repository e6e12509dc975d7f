"""``turngym serve-policy``: a local model (``HFPolicy``) behind an OpenAI-compatible HTTP API.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` (non-streaming; ``tools``, ``n``,
``stop``, ``seed``, ``logprobs``, and vLLM's ``return_token_ids``), ``GET /health``. Options it
cannot honour (``top_logprobs``, ``response_format`` other than text, ``frequency_penalty``,
``presence_penalty``, ``logit_bias``) are refused with a 400 naming the field, never ignored.

Concurrent requests with the same sampling options are batched into one ``generate`` call:
the generation loop takes the oldest request, gathers the others with the same options (up to
``--batch-size`` rows), and answers them all. It gathers while requests keep arriving (each
within ``GATHER_GAP_S`` of the last) or are still being read and tokenized, for at most
``GATHER_MAX_S``: nothing joins a generation once it runs, so on a busy CPU the 4 requests an
eval sends at once would otherwise often go as 2 + 2. With tools in the request, Hermes-style
``<tool_call>{...}</tool_call>`` blocks in the reply come back parsed as ``tool_calls``.

    turngym serve-policy --model runs/exp1/checkpoint --port 8001
    turngym eval turngym/Household-v0 --policy openai:http://127.0.0.1:8001/v1

The weights load in the hardware's fast dtype (``--dtype auto``, as ``--policy hf:`` does):
bfloat16 on CPUs that compute it natively. Pass ``--dtype float32`` for log-probs that match a
float32 trainer's to the last digits.
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any

from turngym.agents.serve_batcher import Batcher
from turngym.core.http_guard import Guard, header_timeout_protocol, is_loopback_name, same_secret
from turngym.tools.parsers import split_tool_calls


def create_app(
    policy,
    served_name: str,
    api_key: str | None = None,
    batch_size: int = 8,
    default_max_tokens: int = 128,
    generator_thread: bool = True,
    local_only: bool | None = None,
):
    """A FastAPI app serving ``policy`` (an ``HFPolicy``) under the model name ``served_name``.
    With ``generator_thread=False`` the caller runs ``app.state.batcher.run()`` itself.
    ``local_only`` (default: when there is no API key) answers only requests whose Host is this
    machine and whose Origin, if any, is too: no web page or DNS-rebound name can use it."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError

    batcher = Batcher(policy, max_rows=batch_size, thread=generator_thread)

    @asynccontextmanager
    async def lifespan(app):
        yield
        batcher.close()

    ChatRequest = _chat_request_model()

    app = FastAPI(title="turngym serve-policy", lifespan=lifespan)
    app.state.batcher = batcher

    app.add_middleware(
        Guard,
        refuse=lambda status, message: _error(status, message),
        local_only=api_key is None if local_only is None else local_only,
    )

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        return _error(400, f"{where or 'request'}: {first.get('msg', 'invalid request')}", param=where)

    @app.middleware("http")
    async def check_key(request: Request, call_next):
        if api_key and request.url.path.startswith("/v1/"):
            header = request.headers.get("authorization", "")
            if not (header.startswith("Bearer ") and same_secret(header[len("Bearer ") :], api_key)):
                return _error(401, "invalid API key", kind="authentication_error")
        if request.method == "POST" and request.url.path == "/v1/chat/completions":
            batcher.arrived(request)  # from here until it is queued, a batch waits for it
        try:
            return await call_next(request)
        finally:
            batcher.prepared(request)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [{"id": served_name, "object": "model", "created": 0, "owned_by": "turngym"}],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatRequest, request: Request):
        if req.model and req.model != served_name:
            return _error(
                404,
                f"model {req.model!r} not found; this server serves {served_name!r}",
                kind="not_found_error",
                param="model",
            )
        if req.stream:
            return _error(400, "stream: streaming is not supported by turngym serve-policy", param="stream")
        refused = _refused_option(req.model_extra or {})
        if refused:
            return _error(400, refused[1], param=refused[0])
        try:
            prompt_ids = policy.encode(req.messages, req.tools)
        except Exception as e:  # a template that cannot render these messages
            return _error(400, f"messages: cannot render with the chat template: {e}", param="messages")
        future = batcher.submit([prompt_ids] * req.n, _sampling_options(req, default_max_tokens))
        batcher.prepared(request)
        generations = await _wait_for_client(future, request)
        if generations is None:  # the client hung up (timed out): its place in the queue was dropped
            return _error(499, "client closed the request", param=None)
        return _completion(req, generations, prompt_ids, policy.tokenizer, served_name)

    return app


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None):
    """An OpenAI-style error body with ``status``."""
    from fastapi.responses import JSONResponse

    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status
    )


def _chat_request_model():
    """The body of ``/v1/chat/completions`` (a pydantic model, made when an app is: pydantic is
    imported only by the server)."""
    from pydantic import BaseModel, ConfigDict, Field

    class ChatRequest(BaseModel):
        model_config = ConfigDict(extra="allow")
        model: str | None = None
        messages: list[dict[str, Any]] = Field(min_length=1)
        tools: list[dict[str, Any]] | None = None
        temperature: float | None = Field(default=None, ge=0)
        top_p: float | None = Field(default=None, gt=0, le=1)
        max_tokens: int | None = Field(default=None, ge=1)
        max_completion_tokens: int | None = Field(default=None, ge=1)
        stop: str | list[str] | None = None
        n: int = Field(default=1, ge=1, le=64)
        seed: int | None = None
        logprobs: bool = False
        stream: bool = False
        return_token_ids: bool = False

    return ChatRequest


def _sampling_options(req, default_max_tokens: int) -> dict[str, Any]:
    """A chat request's sampling options, as the generation loop takes them."""
    options: dict[str, Any] = {
        "temperature": 1.0 if req.temperature is None else req.temperature,
        "top_p": 1.0 if req.top_p is None else req.top_p,
        "max_new_tokens": req.max_completion_tokens or req.max_tokens or default_max_tokens,
        "stop": [req.stop] if isinstance(req.stop, str) else list(req.stop or []),
    }
    if req.seed is not None:
        options["seed"] = req.seed
    return options


def _completion(req, generations, prompt_ids: list[int], tokenizer, served_name: str) -> dict[str, Any]:
    """The chat.completion answer for ``req``'s generations."""
    choices = [
        _choice(i, gen, tokenizer, bool(req.tools), req.logprobs, req.return_token_ids)
        for i, gen in enumerate(generations)
    ]
    completion_tokens = sum(len(g.completion_ids) for g in generations)
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served_name,
        "choices": choices,
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion_tokens,
            "total_tokens": len(prompt_ids) + completion_tokens,
        },
    }
    if req.return_token_ids:
        body["prompt_token_ids"] = prompt_ids
    return body


async def _wait_for_client(future: Future, request, poll_s: float = 0.5):
    """``future``'s result; None if the client disconnects first. A client that timed out and
    retries would otherwise leave its old request queued, and a busy CPU server then works
    through a growing backlog of answers nobody reads."""
    import asyncio

    waiting = asyncio.wrap_future(future)
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=poll_s)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            future.cancel()  # still queued: never generated; already generating: answered to no one
            return None


# OpenAI request options this server cannot honour: a request that sets one to anything but
# its neutral value gets a 400 naming it, instead of a reply that silently ignored it.
# (top_logprobs needs the whole distribution at each token, which the generator does not keep.)
UNSUPPORTED_OPTIONS = {
    "top_logprobs": (None, 0),
    "response_format": (None, {"type": "text"}),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
}


def _refused_option(extra: dict[str, Any]) -> tuple[str, str] | None:
    for name, neutral in UNSUPPORTED_OPTIONS.items():
        if name in extra and extra[name] not in neutral:
            allowed = " or ".join("null" if v is None else repr(v) for v in neutral)
            return name, (f"{name}: not supported by turngym serve-policy (got {extra[name]!r}); allowed: {allowed}")
    return None


def _choice(index: int, gen, tokenizer, with_tools: bool, logprobs: bool, token_ids: bool) -> dict[str, Any]:
    content, calls = split_tool_calls(gen.text) if with_tools else (gen.text, [])
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    choice: dict[str, Any] = {
        "index": index,
        "message": message,
        "finish_reason": "tool_calls" if calls else gen.finish_reason,
        "logprobs": None,
    }
    if logprobs:
        choice["logprobs"] = {
            "content": [
                {
                    "token": (piece := tokenizer.decode([tok])),
                    "logprob": lp,
                    "bytes": list(piece.encode("utf-8")),
                    "top_logprobs": [],
                }
                for tok, lp in zip(gen.completion_ids, gen.logprobs)
            ]
        }
    if token_ids:
        choice["token_ids"] = gen.completion_ids
    return choice


# ----- the command ---------------------------------------------------------------------------


def add_arguments(parser) -> None:
    parser.add_argument(
        "--model",
        default="smollm2-135m",
        help="smollm2-135m (default) | tiny | a checkpoint directory | a .gguf file (an hf: prefix is accepted)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    # 8001: `turngym serve` (the shop site) already defaults to 8000
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--served-model-name", help="the model name clients use (default: --model)")
    parser.add_argument("--api-key", help="require this bearer key (default: $TURNGYM_API_KEY, else none)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    # auto: bfloat16 where the hardware computes it (CPUs with AVX512-BF16 or AMX, most GPUs), as
    # `--policy hf:` loads; float32 made serve-policy 1.6x slower per token than that on such a CPU
    parser.add_argument(
        "--dtype",
        default="auto",
        help="auto (default: the hardware's fast dtype, bfloat16 where native, else float32) | "
        "float32 (log-probs that match a float32 trainer's) | bfloat16 | float16",
    )
    parser.add_argument("--batch-size", type=int, default=8, help="most rows in one generate call")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=128,
        help="max_tokens of a request that sets none (default 128: an agent's action is short)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")


def run(args) -> int:
    import os
    import signal

    import uvicorn

    from turngym.agents.engine.memory import keep_freed_memory
    from turngym.agents.hf import HFPolicy
    from turngym.agents.models import load_model
    from turngym.core.commands import CLIError

    keep_freed_memory()  # the server owns its process: no page faults for each decoding step's cache
    name = args.model.removeprefix("hf:")
    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port: {args.port} is not a TCP port (1-65535)")
    if args.batch_size < 1:
        raise CLIError(f"--batch-size: must be >= 1, got {args.batch_size}")
    api_key = args.api_key or os.environ.get("TURNGYM_API_KEY") or None
    if not api_key and not is_loopback_name(args.host):
        raise CLIError(
            f"--api-key: --host {args.host} is reachable from other machines; give --api-key (or $TURNGYM_API_KEY)"
        )
    try:
        model, tokenizer = load_model(name, device=args.device, dtype=args.dtype)
        policy = HFPolicy(model, tokenizer, batch_size=args.batch_size, name=f"hf:{name}")
    except (ValueError, FileNotFoundError, ImportError) as e:
        raise CLIError(str(e)) from None
    app = create_app(
        policy,
        args.served_model_name or name,
        api_key=api_key,
        batch_size=args.batch_size,
        default_max_tokens=args.max_tokens,
        generator_thread=False,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, http=header_timeout_protocol())
    )

    def serve_http() -> None:
        try:
            server.run()
        finally:
            app.state.batcher.close()  # the generator loop below ends with the server

    def stop(*_) -> None:
        server.should_exit = True
        app.state.batcher.close()

    http = threading.Thread(target=serve_http, name="serve-policy-http", daemon=True)
    http.start()
    signal.signal(signal.SIGTERM, stop)  # uvicorn off the main thread installs no handlers of its own
    print(f"serving {name} at http://{args.host}:{args.port}/v1", flush=True)
    try:
        # generation on the main thread: there a one-row decoding step runs its weight matmuls on
        # torch's own CPU kernels, faster than oneDNN's (the direct decoding step's note)
        app.state.batcher.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.should_exit = True
        http.join(timeout=30)
    return 0 if server.started else 1
