import sys
from pathlib import Path

# tests/ is a package, so pytest puts the repo root on sys.path, not this folder; the shared
# helper modules in tests/support are imported by their bare name (`import contract_env`) from
# every room. A subprocess that needs them puts tests/support on its PYTHONPATH too.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import contract_env  # noqa: E402
import faulty_env  # noqa: E402

contract_env.register()
# The suite's other shared test envs, registered before collection: the registry-wide tests
# (core/test_contract.py, envs/test_envs_junk_actions.py) then cover them whichever files run.
faulty_env.register()
import trainer_envs  # noqa: E402, F401  (registers ShapedCounter, NoLetterE, NoLetterETwice)
