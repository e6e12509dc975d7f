"""Code environments: HumanEval problems and procedurally generated repository repair, run in
``turngym.sandbox``."""
