"""Household: an ALFWorld-style text world in pure Python (engine, generator, tasks, oracle, env)."""
