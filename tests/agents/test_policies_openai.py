"""OpenAIPolicy against `turngym serve-policy` over real HTTP (the embedded model, tools included)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("openai")

import torch  # noqa: E402
from policy_models import cache_env, one_torch_thread, smollm2  # noqa: E402

import turngym  # noqa: E402
from turngym.agents.engine.scoring import score_completions  # noqa: E402
from turngym.agents.hf import HFPolicy  # noqa: E402
from turngym.agents.loading import load_policy  # noqa: E402
from turngym.agents.openai_policy import OpenAIPolicy, OpenAIPolicyError, normalize_base_url  # noqa: E402
from turngym.agents.prompts import build_messages  # noqa: E402
from turngym.core.policy import Conversation  # noqa: E402
from turngym.core.servers import free_port, serving  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-123"
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def real():
    return smollm2()  # converts the GGUF into the test cache the server reads


@pytest.fixture(scope="module")
def server(real):
    flags = ["--model", "smollm2-135m", "--api-key", KEY, "--device", "cpu", "--log-level", "warning"]
    flags += ["--dtype", "float32"]  # its log-probs are compared with float32 scoring
    env = {**cache_env(), "OMP_NUM_THREADS": "1"}
    with serving("serve-policy", *flags, env=env, pythonpath=[ROOT], cwd=ROOT, timeout=180) as (url, _):
        yield f"{url}/v1"


def _call(city: str, i: int) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
            }
        ],
    }


@pytest.mark.model
def test_round_trip_with_tools_over_http(server, real):
    model, tokenizer = real
    policy = OpenAIPolicy(server, api_key=KEY, temperature=0, max_tokens=40, logprobs=True, token_ids=True)
    assert policy.model is None  # discovered from /v1/models
    messages = [
        {"role": "system", "content": "Reply only with a tool call."},
        {"role": "user", "content": "London"},
        _call("London", 1),
        {"role": "tool", "tool_call_id": "call_1", "content": "Rain, 12 C."},
        {"role": "user", "content": "Berlin"},
        _call("Berlin", 2),
        {"role": "tool", "tool_call_id": "call_2", "content": "Sun, 20 C."},
        {"role": "user", "content": "Paris"},
    ]
    conv = Conversation(messages=messages, info={"tools": WEATHER})
    out = policy.act([conv])[0]
    assert policy.model == "smollm2-135m"
    assert out.finish_reason == "tool_calls"
    assert [c["function"]["name"] for c in out.tool_calls] == ["get_weather"]
    assert "Paris" in out.tool_calls[0]["function"]["arguments"]
    assert out.action.startswith("<tool_call>") and '"city": "Paris"' in out.action  # what envs read
    assert out.reply == out.action  # a reply that is only a tool call is its own action

    # The server saw exactly what a local HFPolicy renders (tools and tool history included),
    # and its token data is what scoring the same ids locally gives.
    local = HFPolicy(model, tokenizer)
    assert out.prompt_ids == local.encode(build_messages(conv, policy.prompt), WEATHER)
    prompt_text = tokenizer.decode(out.prompt_ids)
    assert '"name": "get_weather"' in prompt_text and "Sun, 20 C." in prompt_text
    assert len(out.logprobs) == len(out.completion_ids) > 0
    scores = score_completions(model, [out.prompt_ids], [out.completion_ids])
    assert torch.allclose(torch.tensor(out.logprobs), torch.tensor(scores.to_lists()[0][0]), atol=2e-3)
    policy.close()


@pytest.mark.model
def test_plain_chat_batches_and_sampling_options(server):
    policy = OpenAIPolicy(server, api_key=KEY, temperature=0, max_tokens=8, concurrency=2)
    convs = [Conversation(messages=[{"role": "user", "content": "What is the capital of France?"}])] * 2
    outs = policy.act(convs)  # two requests in flight: the server batches them
    assert outs[0].reply == outs[1].reply and "Paris" in outs[0].reply  # greedy: the same answer
    response = policy.chat(
        [{"role": "user", "content": "What is the capital of France?"}],
        n=2,
        temperature=1.0,
        seed=1,
        stop=["Paris"],
    )
    assert len(response.choices) == 2 and response.usage.completion_tokens <= 16
    assert all("Paris" not in c.message.content for c in response.choices)
    assert all(c.finish_reason in ("stop", "length") for c in response.choices)
    policy.close()


@pytest.mark.model
def test_episode_through_envpool_records_token_data(server, real):
    model, _ = real
    policy = load_policy(
        f"openai:{server}",
        api_key=KEY,
        temperature="1.0",
        max_tokens="6",
        token_ids="true",
        logprobs="true",
        concurrency="2",
    )
    with turngym.EnvPool("turngym-tests/Counter-v0", num_envs=2, backend="thread") as pool:
        trajs = pool.rollout(policy, ["counter-1"], group_size=2, seed=0, max_turns=2)
    steps = [s for t in trajs for s in t.steps]
    assert len(steps) >= 2 and all(s.prompt_ids and s.completion_ids for s in steps)
    scores = score_completions(model, [s.prompt_ids for s in steps], [s.completion_ids for s in steps])
    for s, lp in zip(steps, scores.to_lists()[0]):
        assert torch.allclose(torch.tensor(s.logprobs), torch.tensor(lp), atol=2e-3)
    policy.close()


@pytest.mark.model
def test_tools_mode_episode_over_http(server, real):
    _, tokenizer = real
    policy = OpenAIPolicy(server, api_key=KEY, temperature=0, max_tokens=24, token_ids=True)
    with turngym.EnvPool("turngym-tests/Counter-tools-v0", num_envs=1, backend="inline") as pool:
        traj = pool.rollout(policy, ["counter-1"], seed=0, max_turns=2)[0]
    assert traj.scorable and traj.steps
    for step in traj.steps:  # tools come on reset only; every turn's prompt still declares them
        assert '"name": "submit"' in tokenizer.decode(step.prompt_ids)
        if step.action.startswith('{"tool_calls"'):  # a call the server parsed reaches the env as one
            assert step.info["action_valid"] or step.info["parse_error"]
    policy.close()


@pytest.mark.model
def test_clear_errors(server):
    conv = Conversation(messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(OpenAIPolicyError, match="API key was rejected"):
        OpenAIPolicy(server, api_key="wrong", max_tokens=2).act([conv])
    with pytest.raises(OpenAIPolicyError, match="not found .404. for model 'gpt-9'"):
        OpenAIPolicy(server, model="gpt-9", api_key=KEY, max_tokens=2).act([conv])
    with pytest.raises(OpenAIPolicyError, match="HTTP 400: temperature"):
        OpenAIPolicy(server, api_key=KEY).chat([{"role": "user", "content": "hi"}], temperature=-1)
    with pytest.raises(OpenAIPolicyError, match="HTTP 400: stream"):
        OpenAIPolicy(server, api_key=KEY).chat([{"role": "user", "content": "hi"}], stream=True)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(OpenAIPolicyError, match=r"cannot connect \(after 3 attempts\)"):
        OpenAIPolicy(dead, max_retries=2, backoff=0.01).act([conv])
    with pytest.raises(ValueError, match="not an http"):
        OpenAIPolicy("localhost:8000")
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIPolicy(server, concurrency=0)
    assert normalize_base_url("http://h:1") == "http://h:1/v1"
    assert normalize_base_url("https://api.example.com/v1/") == "https://api.example.com/v1"


@pytest.mark.model
def test_serve_policy_refuses_options_it_cannot_honour(server):
    """top_logprobs, response_format, frequency_penalty (and kin) reach the request (they were once silently ignored)."""
    policy = OpenAIPolicy(server, api_key=KEY, max_tokens=2)
    hi = [{"role": "user", "content": "hi"}]
    for option, value in (
        ("top_logprobs", 2),
        ("response_format", {"type": "json_object"}),
        ("frequency_penalty", 0.5),
        ("presence_penalty", 1.0),
        ("logit_bias", {"42": 5}),
    ):
        with pytest.raises(OpenAIPolicyError, match=f"HTTP 400: {option}: not supported"):
            policy.chat(hi, **{option: value})
    # their neutral values are fine
    reply = policy.chat(hi, frequency_penalty=0, response_format={"type": "text"})
    assert reply.choices


def test_serve_policy_default_port_differs_from_serve():
    import argparse

    from turngym.agents import serve as serve_policy
    from turngym.envs.shop import serve as serve_shop

    ports = []
    for module in (serve_policy, serve_shop):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        ports.append(parser.get_default("port"))
    assert ports[0] != ports[1], ports


def test_serve_policy_bad_arguments(capsys):
    from turngym.cli import main

    assert main(["serve-policy", "--model", "/no/such/dir", "--port", "1"]) == 2
    assert "neither a known name" in capsys.readouterr().err
    assert main(["serve-policy", "--model", "tiny", "--port", "70000"]) == 2


def test_replies_stop_at_the_action_and_closing_tags_come_back():
    from turngym.agents.openai_policy import action_stops, close_action

    assert action_stops("plain", has_tools=True) == ["</tool_call>"]
    assert action_stops("tags", has_tools=False) == ["</action>"]
    assert action_stops("plain", has_tools=False) == ["\n"]
    assert (
        close_action('<tool_call>{"name": "inc", "arguments": {}}')
        == '<tool_call>{"name": "inc", "arguments": {}}</tool_call>'
    )
    assert close_action("<think>x</think><action>go north") == "<think>x</think><action>go north</action>"
    assert close_action("go north") == "go north"


@pytest.mark.model
def test_requests_end_the_reply_at_the_action(server):
    """`turngym eval --policy openai:URL` once sent no stop and max_tokens 256, so a small CPU
    model wrote on past its action for minutes. The official openai client carries the stop."""
    policy = load_policy(f"openai:{server}", api_key=KEY, temperature="0")
    sent = []
    create = policy.client.chat.completions.create

    def record(**body):
        sent.append(body)
        return create(**body)

    policy.client.chat.completions.create = record
    tools_conv = Conversation(
        messages=[
            {"role": "system", "content": "Reply only with a tool call."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        info={"tools": WEATHER},
    )
    plain_conv = Conversation(messages=[{"role": "user", "content": "Name three colours, one per line."}])
    tools_out, plain_out = policy.act([tools_conv, plain_conv])
    by_tools = {bool(b.get("tools")): b for b in sent}
    assert by_tools[True]["stop"] == ["</tool_call>"] and by_tools[False]["stop"] == ["\n"]
    assert all(b["max_tokens"] == 128 for b in sent)
    assert "\n" not in plain_out.reply.strip()  # the reply ended with its first line
    if "<tool_call>" in tools_out.reply:  # nothing after the call, and the call is whole
        assert tools_out.reply.rstrip().endswith("</tool_call>")
    policy.close()


def test_serve_policy_defaults_short_replies_in_the_fast_dtype():
    import argparse

    from turngym.agents import serve as serve_policy

    parser = argparse.ArgumentParser()
    serve_policy.add_arguments(parser)
    assert parser.get_default("max_tokens") == 128
    assert parser.get_default("dtype") == "auto"  # as `--policy hf:` loads: bfloat16 where the CPU has it
