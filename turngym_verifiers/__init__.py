"""verifiers finds a taskset by module name; this one is turngym's (``turngym.integrations.verifiers``)."""

from turngym.integrations.verifiers import *  # noqa: F403
from turngym.integrations.verifiers import __all__  # noqa: F401
