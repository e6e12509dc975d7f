"""An OpenAI-compatible relay that answers `stream: true` requests from a non-streaming server.

`turngym serve-policy` answers whole completions; verifiers' chat harness always streams. This
relay asks the real server for the whole completion and re-frames it as server-sent events
(one content chunk, one closing chunk with usage, then [DONE]); the model's reply is untouched.
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time.

import json


def create_relay(upstream: str):
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()
    client = httpx.AsyncClient(base_url=upstream.rstrip("/"), timeout=300)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return (await client.get("/v1/models")).json()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        stream = body.pop("stream", False)
        body.pop("stream_options", None)
        response = await client.post("/v1/chat/completions", json=body)
        if response.status_code != 200 or not stream:
            return JSONResponse(response.json(), status_code=response.status_code)
        whole = response.json()

        def events():
            base = {
                "id": whole["id"],
                "object": "chat.completion.chunk",
                "created": whole["created"],
                "model": whole["model"],
            }
            for choice in whole["choices"]:
                delta = {"role": "assistant", "content": choice["message"].get("content") or ""}
                if choice["message"].get("tool_calls"):
                    delta["tool_calls"] = [
                        {**call, "index": i} for i, call in enumerate(choice["message"]["tool_calls"])
                    ]
                yield f"data: {json.dumps({**base, 'choices': [{'index': choice['index'], 'delta': delta, 'finish_reason': None}]})}\n\n"
                yield f"data: {json.dumps({**base, 'choices': [{'index': choice['index'], 'delta': {}, 'finish_reason': choice['finish_reason']}]})}\n\n"
            yield f"data: {json.dumps({**base, 'choices': [], 'usage': whole['usage']})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
