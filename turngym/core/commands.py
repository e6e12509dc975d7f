"""What the ``turngym`` commands share: the user-error type, the result table, serving until
Ctrl-C. The command modules sit on every floor (``view`` in the viewer, ``serve`` in tools and
envs, ``train`` in the trainers), so these live in the core, which every floor may import."""

from __future__ import annotations


class CLIError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def format_table(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    widths = [max(len(c), *(len(cell(r.get(c, ""))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(cell(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))
    return "\n".join(lines)


def serve_until_interrupted(server) -> int:
    """Serve an http.server until Ctrl-C, then close its socket; the exit code."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
