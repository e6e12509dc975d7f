"""``turngym serve-env``: many sessions of any registered env behind an HTTP API.

A session is one env instance owned by one client. The API mirrors Gymnasium's:

    POST   /sessions                      {"env_id", "env_kwargs"}   -> {"session_id", ...}
    POST   /sessions/{id}/reset           {"seed", "options"}        -> {"observation", "info"}
    POST   /sessions/{id}/step            {"action"}                 -> {"observation", "reward",
                                                                        "terminated", "truncated", "info"}
    POST   /sessions/{id}/expert_step     {}                         -> the step, plus "action"
    GET    /sessions/{id}                 tools, admissible actions, instructions, turn
    GET    /sessions/{id}/task_ids?split= the env's task ids
    DELETE /sessions/{id}
    POST   /sessions/{id}/snapshot        {}  -> {"snapshot_id", ...}   (the state stays here)
    POST   /sessions/{id}/fork            {}  -> a new session in this one's state
    POST   /sessions                      {"env_id", "snapshot_id"}  -> a new session in a kept state
    DELETE /snapshots/{snapshot_id}
    POST   /batch                         {"ops": [{"op": "reset" | "step" | ..., "timeout_s", ...}]}
    GET    /envs, /stats, /health, /openapi.json (the schema), /docs
    /openenv/{env_id}/...                 the same envs for OpenEnv clients (``turngym.integrations.openenv``)

``info`` is the env's StepInfo, as JSON. Each session's env runs in a process of its own
(``EnvProcess``), so env code, C code included, can be killed: a call past the step timeout
(or past a batch op's own shorter ``timeout_s``) kills that process, the session is closed and the answer says ``scorable: false`` (a hung env
must not pass for a reward of 0). An env that raises (``SystemExit`` included) or exits
(``os._exit``) answers 500 with ``scorable: false`` and is rebuilt at the next reset. Either
way only that session pays. The server waits on those processes from its event loop: a call in
flight holds a pipe, never a thread, so steps never queue behind a pool. Envs whose class sets
``shares_process = True`` run as threads in shared host processes instead (light mode,
``shared``); ``--isolate-all`` turns that off.
Limits (``ServerLimits``): how many sessions may be open, how long one env call may take, how
long a session may sit idle before it is closed, the longest action, and whether every env gets
a process of its own. The caller's mistakes answer 4xx naming the field (``validate``): a bad
seed, options, env_kwargs or split 400, a step before reset or after the episode ended 409.
With ``token`` set, every route but /health, /docs and /openapi.json needs ``Authorization:
Bearer TOKEN``, or the token as a path prefix ``/token/TOKEN/...`` (for clients that send no
headers, such as OpenEnv's); without one, a loopback server answers only requests whose Host and
Origin are this machine (``turngym.core.http_guard``).
"""
