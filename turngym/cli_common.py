"""The commands' shared helpers, importable from here as before; they live in
``turngym.core.commands`` so the command modules below the command line (view, serve, train,
...) need nothing from this floor."""

from turngym.core.commands import CLIError, format_table, serve_until_interrupted

__all__ = ["CLIError", "format_table", "serve_until_interrupted"]
