"""Room sizes: no module in turngym/ over 450 lines and no function over 100, so a newcomer can
read any room and any step in a few screens (counted on the ``ruff format`` layout, line length 120)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "turngym"
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 100


def oversized(package: Path = PACKAGE) -> list[str]:
    """'path: N lines' for every module over the file limit and 'path:line name: N lines' for every
    function (methods and nested functions included) over the function limit."""
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(package.parent)
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found.append(f"{where}: {lines} lines")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = node.end_lineno - start + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_or_function_is_over_the_limits():
    assert oversized() == [], "over the limits:\n" + "\n".join(oversized())


def test_the_walk_finds_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "turngym"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text('"""Long."""\n\n\ndef f():\n' + body + "\n")
    (package / "big.py").write_text("\n".join(f"y{i} = {i}" for i in range(MAX_FILE_LINES + 1)) + "\n")
    assert oversized(package) == ["turngym/big.py: 451 lines", "turngym/long.py:4 f: 101 lines"]
