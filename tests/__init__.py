"""turngym's tests, filed by the room of the package they test (tests/core, tests/envs, ...).

Every folder is a package, so two rooms may hold test files of the same name. The shared helper
modules (contract_env, helpers, env_servers, ...) stay here and are imported by their bare name:
conftest.py puts this folder on sys.path.
"""
