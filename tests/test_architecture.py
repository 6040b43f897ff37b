"""The code's shape: the floors (contracts -> runtime -> services -> command line) with no
arrow running back up and no import cycle, modules small enough to read in one sitting, and
the README's map of the code naming what is there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contracts", "services", "tests", "bench")
MAX_LINES = 400
SERVICES = ("gateway", "frontline", "orchestrator", "evaluator", "workers")
# Rooms on the services' floor that are not services: the eval harness (used by the CLI).
TOOLS = ("evals",)
# The runtime's sub-packages, lowest first: each imports only lower levels (and not its siblings
# on its own level). Each one's __init__.py says so in words.
RUNTIME_LEVELS = {
    "base": 0,
    "walls": 1,
    "llm": 1,
    "bus": 1,
    "requests": 2,
    "budgets": 2,
    "approvals": 3,
    "hosting": 4,
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "cache" in path.parts or ".venv" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports (the longest known prefix of each name)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for name in names:
            parts = name.split(".")
            for n in range(len(parts), 0, -1):
                candidate = ".".join(parts[:n])
                if candidate in known:
                    out.add(candidate)
                    break
    return out


def floor(module: str) -> tuple[int, str]:
    """(height, room): a module may import its own room and anything on a lower floor."""
    parts = module.split(".")
    if parts[0] == "contracts":
        return 0, "contracts"
    if parts[0] == "services" and len(parts) > 1:
        if parts[1] == "runtime":
            return 1, "runtime"
        if parts[1] in SERVICES or parts[1] in TOOLS:
            return 2, parts[1]
        if parts[1] == "cli":
            return 3, "cli"
    return 4, parts[0]  # tests, bench: anything


def test_no_import_runs_back_up_a_floor_or_across_services() -> None:
    found = modules()
    wrong = []
    for module, path in found.items():
        height, room = floor(module)
        for target in imports(path, set(found)):
            t_height, t_room = floor(target)
            if t_height > height or (t_height == height and t_room != room and height < 4):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def runtime_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["services", "runtime"]:
        return None
    return parts[2] if len(parts) > 2 else "runtime"


def test_runtime_sub_packages_import_only_those_below_them() -> None:
    found = modules()
    rooms = {runtime_room(m) for m in found} - {None, "runtime"}
    assert rooms == set(RUNTIME_LEVELS), f"every runtime sub-package has a level: {rooms}"
    wrong = []
    for module, path in found.items():
        room = runtime_room(module)
        if room is None or room == "runtime":
            continue
        for target in imports(path, set(found)):
            t_room = runtime_room(target)
            if t_room is None or t_room == room:
                continue
            if t_room == "runtime" or RUNTIME_LEVELS[t_room] >= RUNTIME_LEVELS[room]:
                wrong.append(f"{module} ({room}) imports {target} ({t_room})")
    assert not wrong, "\n".join(sorted(wrong))


def test_runtime_has_no_loose_modules_and_each_sub_package_says_what_it_holds() -> None:
    runtime = ROOT / "services" / "runtime"
    loose = sorted(p.name for p in runtime.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"put these in a sub-package: {loose}"
    for room in RUNTIME_LEVELS:
        doc = ast.get_docstring(ast.parse((runtime / room / "__init__.py").read_text()))
        assert doc and "import" in doc.lower(), (
            f"services/runtime/{room}/__init__.py: say what it imports"
        )


def test_there_is_no_import_cycle() -> None:
    found = modules()
    graph = {m: imports(p, set(found)) - {m} for m, p in found.items()}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            # A package importing its own submodules (re-exports) is not a cycle.
            if not target.startswith(module + "."):
                visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in modules().values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_the_readme_map_names_every_package_and_only_paths_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Map of the code", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_/.]+(?:/|\.py|\.md))`", section))
    assert named, "the README has a map of the code"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"the README's map names paths that do not exist: {missing}"
    packages = {
        str(p.parent.relative_to(ROOT)) + "/"
        for pattern in ("*/__init__.py", "runtime/*/__init__.py")
        for p in (ROOT / "services").glob(pattern)
    } | {"contracts/", "tests/", "deploy/", "bench/", "docs/"}
    unnamed = sorted(p for p in packages if p not in named)
    assert not unnamed, f"the README's map leaves out: {unnamed}"
