"""Run one verifiers (0.4) episode of a turngym env; executed by the verifiers bench venv's python.

    python verifiers_episode.py MODEL_BASE_URL ENV_ID MAX_TURNS   -> one JSON line

The taskset and env are found through verifiers' own loader by the id ``turngym_verifiers``; the
agent is verifiers' chat harness (``null``) in a local subprocess runtime, talking to the model
through verifiers' interception server.
"""

import asyncio
import json
import os
import sys

import verifiers.v1 as vf
from verifiers.v1.env import RunSlot
from verifiers.v1.utils.loaders import environment_class, load_environment, taskset_config_type


def main() -> None:
    base_url, env_id, max_turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # the harness' chat program runs through uv, installed in this venv
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    config_type = taskset_config_type("turngym_verifiers")
    env_config_type = environment_class("turngym_verifiers").__orig_bases__[0].__args__[0]
    config = env_config_type(
        taskset=config_type(id="turngym_verifiers", env_id=env_id, limit=2, max_turns=max_turns),
        player=vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig()),
    )
    env = load_environment(config)
    tasks = list(env.taskset)
    ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=base_url, api_key_var="OPENAI_API_KEY"), model="tiny")

    async def run():
        async with env.serving():
            return await env.run_slot(RunSlot(tasks[0]), ctx)

    episode = asyncio.run(run())
    trace = episode.traces[0]
    dumped = json.loads(trace.model_dump_json())
    print(
        json.dumps(
            {
                "env_class": type(env).__name__,
                "tasks": [t.data.name for t in tasks],
                "prompt": tasks[0].data.prompt,
                "system_prompt": tasks[0].data.system_prompt,
                "ok": episode.ok,
                "errors": [e.message for e in episode.errors] + [e["message"] for e in dumped.get("errors", [])],
                "rewards": {k: v["score"] for k, v in dumped["rewards"].items()},
                "info": dumped["info"],
                "trace": json.dumps(dumped)[:200000],
            }
        )
    )


if __name__ == "__main__":
    main()
