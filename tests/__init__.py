"""turngym's tests, filed by the room of the package they test (tests/core, tests/envs, ...).

Every folder is a package, so two rooms may hold test files of the same name. The shared helper
modules (contract_env, helpers, env_servers, ...) live in tests/support, a plain folder, and are
imported by their bare name: conftest.py puts it on sys.path. tests/benchmarks holds the tests of
the scripts in benchmarks/.
"""
