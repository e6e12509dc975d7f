"""The package's import structure (issue 21): nothing below the command line imports
``turngym.cli``, and the registration modules never use the half-initialised ``turngym``."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "turngym"
#: the only modules that may import turngym.cli: the command line itself and `python -m turngym`
CLI_MODULES = {PACKAGE / "cli.py", PACKAGE / "__main__.py"}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path = ROOT) -> set[str]:
    """Every module an import statement in ``path`` names (relative ones resolved), and every
    string constant that spells a module, as in ``importlib.import_module("turngym.cli")``."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value.partition(":")[0])
    return names


def test_only_the_command_line_imports_turngym_cli():
    offenders = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                       if p not in CLI_MODULES and "turngym.cli" in imported_names(p))
    assert not offenders, f"import from turngym.cli_common instead: {offenders}"


def test_the_scan_sees_every_way_of_importing_the_cli(tmp_path):
    pkg = tmp_path / "turngym" / "viewer"
    pkg.mkdir(parents=True)
    forms = ["from turngym.cli import CLIError", "import turngym.cli", "from turngym import cli",
             "from .. import cli", "from ..cli import CLIError", "importlib.import_module('turngym.cli')"]
    for i, form in enumerate(forms):
        (pkg / f"m{i}.py").write_text(form + "\n")
        assert "turngym.cli" in imported_names(pkg / f"m{i}.py", root=tmp_path), form
    (pkg / "ok.py").write_text("from turngym.cli_common import CLIError\nimport turngym.trainers.cli\n")
    assert "turngym.cli" not in imported_names(pkg / "ok.py", root=tmp_path)


REGISTRATION_MODULES = sorted(module_name(p) for p in PACKAGE.rglob("registration.py"))

# Run first thing in a fresh interpreter: every import statement executed by a registration module
# is checked for handing it a module that is still being initialised (as turngym is while its
# __init__ registers the built-in envs).
WATCH = """
import builtins, importlib, json, sys
real_import, seen = builtins.__import__, []

def watch(name, globals=None, locals=None, fromlist=(), level=0):
    module = real_import(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    ours = importer.startswith("turngym.") and importer.endswith(".registration")
    if ours and getattr(module.__spec__, "_initializing", False):
        seen.append(f"{importer} imports {name!r}: {module.__name__} is partially initialised")
    return module

builtins.__import__ = watch
importlib.import_module(sys.argv[1])
builtins.__import__ = real_import
import turngym
print(json.dumps({"seen": seen, "envs": len(turngym.list_envs())}))
"""


def test_there_are_registration_modules():
    assert "turngym.tools.registration" in REGISTRATION_MODULES and len(REGISTRATION_MODULES) >= 7


@pytest.mark.parametrize("module", REGISTRATION_MODULES)
def test_a_registration_module_never_uses_a_half_initialised_package(module):
    r = subprocess.run([sys.executable, "-c", WATCH, module], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["seen"] == []
    assert result["envs"] > 100  # importing it first still registers every built-in env
