"""ToolQA: an env family for evaluating tool-using policies (calculator, search, python)."""
