"""OpenEnv's own client (openenv-core, in .bench-venvs/openenv) playing turngym envs on serve-env.

    python openenv_episode.py PLAN_JSON

PLAN_JSON: {"episodes": [{"base_url": ..., "reset": {...}, "actions": [...]}, ...],
            "schema_url": ... (optional)}. Prints one JSON line: per episode, the reset and every
step as {"observation", "reward", "done"}, or {"error": message} where the client raised.
Imports nothing from turngym: this is what a TRL / SkyRL user's process runs.
"""

import json
import sys

from openenv.core import GenericEnvClient


def play(episode: dict) -> list[dict]:
    out = []
    with GenericEnvClient(base_url=episode["base_url"], message_timeout_s=60).sync() as env:
        calls = [("reset", episode.get("reset") or {})] + [("step", a) for a in episode.get("actions", [])]
        for kind, arg in calls:
            try:
                result = env.reset(**arg) if kind == "reset" else env.step({"action": arg})
                out.append({"observation": result.observation, "reward": result.reward, "done": result.done})
            except Exception as e:  # the client's own error (a server error message, a refused connection)
                out.append({"error": f"{type(e).__name__}: {e}"})
        if episode.get("state"):
            out.append({"state": env.state()})
    return out


def main() -> None:
    plan = json.loads(sys.argv[1])
    results = []
    for episode in plan["episodes"]:
        try:
            results.append(play(episode))
        except Exception as e:  # connecting failed
            results.append([{"error": f"{type(e).__name__}: {e}"}])
    print(json.dumps({"episodes": results}))


if __name__ == "__main__":
    main()
