"""``turngym serve-env``'s command line."""

import turngym
from turngym.core.http_guard import header_timeout_protocol
from turngym.integrations.env_server.app import create_app
from turngym.integrations.env_server.sessions import ServerLimits, SessionStore

# An idle keep-alive connection stays open this long, well past the client's own expiry
# (env_client.KEEPALIVE_S): the client always drops a connection first, so it never reuses one
# the server is closing (a ReadError under load).
KEEP_ALIVE_S = 75


def add_arguments(p) -> None:
    p.add_argument(
        "--env",
        action="append",
        dest="envs",
        metavar="ENV_ID",
        help="serve only this env id (repeatable; default: every registered env)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8100)
    p.add_argument(
        "--token",
        help="require 'Authorization: Bearer TOKEN' or the URL prefix /token/TOKEN "
        "(default: $TURNGYM_ENV_TOKEN, else none; needed off loopback)",
    )
    p.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="allow a --host other than loopback without a token (anyone who reaches the port "
        "can run envs, and --import'ed code, here)",
    )
    p.add_argument("--max-sessions", type=int, default=1024)
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds one reset/step may take")
    p.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed")
    p.add_argument("--max-action-chars", type=int, default=100_000)
    p.add_argument(
        "--max-snapshots",
        type=int,
        default=4096,
        help="snapshots kept for clients (POST /sessions/ID/snapshot); past it the oldest is dropped",
    )
    p.add_argument(
        "--max-snapshot-mb",
        type=float,
        default=1024.0,
        help="the kept snapshots' bytes together, in MiB; past it the oldest are dropped, and a larger "
        "snapshot is refused (413)",
    )
    p.add_argument(
        "--isolate-all",
        action="store_true",
        help="a process per session for every env, also those that declare shares_process = True "
        "(which otherwise run as threads in a few shared processes)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE[:FUNCTION]",
        help="import a module that registers envs (and call FUNCTION from it), repeatable",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level")


def import_registrations(imports: list[str]) -> None:
    """Import ``module`` or call ``module:function`` for each entry (user envs register there)."""
    import importlib

    for entry in imports:
        module, _, function = entry.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args) -> int:
    import os

    import uvicorn

    from turngym.core.commands import CLIError

    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port: {args.port} is not a TCP port (1-65535)")
    try:
        limits = ServerLimits(
            max_sessions=args.max_sessions,
            step_timeout_s=args.step_timeout,
            idle_timeout_s=args.idle_timeout,
            max_action_chars=args.max_action_chars,
            isolate_all=args.isolate_all,
            max_snapshots=args.max_snapshots,
            max_snapshot_mb=args.max_snapshot_mb,
        )
    except ValueError as e:
        raise CLIError("--" + str(e).replace("_s:", ":").replace("_", "-")) from None
    try:
        import_registrations(args.imports)
    except (ImportError, AttributeError) as e:
        raise CLIError(f"--import: {e}") from None
    for env_id in args.envs or []:
        try:
            turngym.spec(env_id)
        except ValueError as e:
            raise CLIError(f"--env: {e}") from None
    token = args.token or os.environ.get("TURNGYM_ENV_TOKEN") or None
    if not token and not is_loopback(args.host) and not getattr(args, "insecure_no_token", False):
        raise CLIError(
            f"--token: --host {args.host} is reachable from other machines; give --token (or "
            "$TURNGYM_ENV_TOKEN), or pass --insecure-no-token to serve without one"
        )
    local_only = not token and is_loopback(args.host)  # a page in a browser here must not drive it
    app = create_app(SessionStore(limits, env_ids=args.envs), token=token, local_only=local_only)
    print(
        f"serving turngym envs at http://{args.host}:{args.port} (schema: /openapi.json; OpenEnv clients: "
        f"http://{args.host}:{args.port}{'/token/TOKEN' if token else ''}/openenv/ENV_ID)",
        flush=True,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=header_timeout_protocol(),
        # messages are short JSON: compressing each costs the event loop more than it saves on
        # loopback or a LAN (zlib was a tenth of the loop's time with 512 sockets)
        ws_per_message_deflate=False,
    )
    return 0
