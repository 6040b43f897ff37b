"""The code's shape: the floors (contracts -> runtime -> services -> command line) with no
arrow running back up and no import cycle, the gateway's surfaces each over the core and none
over another, modules small enough to read in one sitting, and the README's map of the code
naming what is there."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
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
GATEWAY = ROOT / "services" / "gateway"
# The gateway's packages: the core every surface shares, and one package per surface.
GATEWAY_SURFACES = ("ws", "workflows", "openai", "a2a", "agui", "approvals", "page", "requests")


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


def gateway_package(module: str) -> str | None:
    """The gateway package a module is in (core or a surface); None outside them."""
    parts = module.split(".")
    if parts[:2] != ["services", "gateway"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in (*GATEWAY_SURFACES, "core") else None


def test_no_gateway_surface_imports_another_and_the_core_imports_none() -> None:
    packages = {p.parent.name for p in GATEWAY.glob("*/__init__.py")}
    assert packages == {"core", *GATEWAY_SURFACES}, (
        f"every gateway package is the core or a known surface: {sorted(packages)}"
    )
    found = modules()
    wrong = []
    for module, path in found.items():
        own = gateway_package(module)
        if own is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree)):
            wrong.append(f"{module} imports relatively (this check reads absolute imports)")
        for target in imports(path, set(found)):
            other = gateway_package(target)
            if other is not None and other not in (own, "core"):
                wrong.append(f"{module} ({own}) imports {target} ({other})")
    assert not wrong, "\n".join(sorted(wrong))


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


def runtime_packages() -> list[Path]:
    """services/runtime/ and every package under it, new ones included."""
    runtime = ROOT / "services" / "runtime"
    return sorted(p.parent for p in runtime.rglob("__init__.py") if "__pycache__" not in p.parts)


def test_every_runtime_package_docstring_names_each_of_its_modules() -> None:
    """Each package under services/runtime/ is read from its docstring first, so the docstring
    names every module (`name.py`) and sub-package (`name/`) in it, a new one too."""
    wrong = []
    for package in runtime_packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
        parts = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
        parts += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()]
        missing = [
            part
            for part in sorted(parts)
            if not re.search(rf"(?<![\w.]){re.escape(part)}(?!\w)", doc or "")
        ]
        if missing:
            where = package.relative_to(ROOT) / "__init__.py"
            wrong.append(f"{where}: its docstring does not name {', '.join(missing)}")
    assert len(runtime_packages()) > len(RUNTIME_LEVELS), "the scan finds the sub-packages"
    assert not wrong, "\n".join(wrong)


# Not SidekickErrors on purpose, for now: the gateway is being moved into services/gateway/core/
# and one package per surface (issue 33), and that move makes `GatewayError` a SidekickError;
# gateway files are left to it. The tree in services/runtime/base/errors.py draws these where
# the move puts them. Once it lands, these names are gone and the test below says to drop them.


def error_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined at the top level of a module under services/, by its
    qualified name (the modules imported, so inheritance is the interpreter's, not a guess)."""
    found: dict[str, type[BaseException]] = {}
    for module, path in modules().items():
        if not module.startswith("services.") or path.name == "__main__.py":
            continue  # a __main__ runs the command line when imported
        for name, value in vars(importlib.import_module(module)).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module
            ):
                found[f"{module}.{name}"] = value
    return found


def test_every_error_class_under_services_is_a_sidekick_error() -> None:
    from services.runtime.base.errors import SidekickError

    found = error_classes()
    assert len(found) > 40, "the scan finds the project's error classes"
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, SidekickError))
    assert not outside, (
        f"hang these under SidekickError (services/runtime/base/errors.py): {outside}"
    )


def drawn_tree(doc: str) -> dict[tuple[str, str], tuple[str, str] | None]:
    """The tree in base/errors.py's docstring: (path under services/, class) -> its parent's
    (path, class), None for the root. Paths as the drawing's rules give them."""
    root = ("runtime/base/errors.py", "SidekickError")
    tree: dict[tuple[str, str], tuple[str, str] | None] = {root: None}
    section = ""
    chain: list[tuple[str, str]] = []  # the last node drawn at each depth
    for line in doc.splitlines():
        header = re.match(r" \|  ([\w/]+(?:\.py|/))(?:\s|$)", line)
        node = re.match(r"(?P<lead>[ |]*)\+-- (?P<name>\w+)(?:\s+(?P<note>.*))?$", line)
        if header:
            section, chain = header[1], []
        elif node:
            depth = (len(node["lead"]) - 1) // 5
            folder = section if section.endswith("/") else section.rsplit("/", 1)[0] + "/"
            own = re.match(r"([\w/]+\.py):", node["note"] or "")
            parent = chain[depth - 1] if depth else root
            if own:
                path = own[1] if "/" in own[1] else folder + own[1]
            else:
                path = parent[0] if depth else section
            chain = [*chain[:depth], (path, node["name"])]
            tree[(path, node["name"])] = parent
    return tree


def test_the_error_tree_is_drawn_once_and_as_the_code_has_it() -> None:
    """Every SidekickError is drawn in SidekickError's module docstring, in its own module and
    under its own parent, and everything drawn exists."""
    from services.runtime.base import errors

    found = error_classes()
    project = set(found.values())

    def place(cls: type[BaseException]) -> tuple[str, str]:
        path = modules()[cls.__module__].relative_to(ROOT / "services")
        return (path.as_posix(), cls.__name__)

    real: dict[tuple[str, str], tuple[str, str] | None] = {}
    for cls in found.values():
        parent = next((b for b in cls.__mro__[1:] if b in project), None)
        real[place(cls)] = place(parent) if parent else None
    drawn = drawn_tree(errors.__doc__ or "")

    def named(node: tuple[str, str] | None) -> str:
        return node[1] if node else "nothing"

    wrong = [
        f"{path}: {name} is under {named(parent)} in the code, "
        + (
            f"under {named(drawn[path, name])} in the tree"
            if (path, name) in drawn
            else "not drawn"
        )
        for (path, name), parent in sorted(real.items())
        if drawn.get((path, name), ()) != parent
    ]
    wrong += [
        f"{path}: {name} is drawn there, the code has no such class"
        for (path, name) in sorted(drawn)
        if (path, name) not in real
    ]
    assert not wrong, "services/runtime/base/errors.py's tree:\n" + "\n".join(wrong)
