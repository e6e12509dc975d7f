"""Tests of the scripts in benchmarks/ (their arithmetic and their runs on the tiny model)."""
