"""What the code reads from the environment, found in its own structure: the settings classes'
fields, `os.environ` reads by hand, and names built by f-strings; and which of those a text
documents."""

from __future__ import annotations

import ast
import functools
import re

from pydantic_settings import BaseSettings

from services.runtime.base.settings import Settings
from services.workers.settings import WorkerSettings
from services.workers.tools.settings import ToolsSettings
from tests.support.docs_text import ROOT, abbreviated_names

SETTINGS_CLASSES: tuple[type[BaseSettings], ...] = (Settings, WorkerSettings, ToolsSettings)


def env_names(cls: type[BaseSettings]) -> dict[str, object]:
    """Each variable a settings class reads, and its field's default."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    out: dict[str, object] = {}
    for name, field in cls.model_fields.items():
        alias = field.validation_alias
        variables = (
            [str(c) for c in getattr(alias, "choices", [alias])]
            if alias
            else [f"{prefix}{name}".upper()]
        )
        for variable in variables:
            out[variable] = field.default
    return out


def environ_reads() -> set[str]:
    """`SIDEKICK_*` names the code reads from an environment mapping by hand (os.environ.get,
    os.environ[...], `in os.environ`, the judge's `pick(...)`)."""
    found: set[str] = set()
    for path in (ROOT / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            values: list[ast.expr] = []
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in {"get", "getenv", "pick"}:
                    values = list(node.args)
            elif isinstance(node, ast.Subscript):
                values = [node.slice]
            elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In):
                values = [node.left]
            for value in values:
                if (
                    isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and re.fullmatch(r"SIDEKICK_[A-Z0-9_]+", value.value)
                ):
                    found.add(value.value)
    return found


@functools.cache
def read_variables() -> frozenset[str]:
    names = environ_reads()
    for cls in SETTINGS_CLASSES:
        names |= set(env_names(cls))
    return frozenset(names)


@functools.cache
def read_patterns() -> tuple[re.Pattern[str], ...]:
    """Names the code builds, `f"SIDEKICK_{service.upper()}_NATS_{what}"`, as patterns."""
    found = set()
    for path in (ROOT / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.JoinedStr):
                continue
            parts = [
                re.escape(str(v.value))
                if isinstance(v, ast.Constant)
                else "[A-Z0-9]+(?:_[A-Z0-9]+)*"
                for v in node.values
            ]
            literal = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
            first = node.values[0] if node.values else None
            if (
                isinstance(first, ast.Constant)
                and str(first.value).startswith("SIDEKICK_")
                and re.fullmatch(r"[A-Z0-9_]+", literal)
            ):
                found.add("".join(parts))
    return tuple(re.compile(p) for p in sorted(found))


def as_pattern(name: str) -> re.Pattern[str]:
    """A documented name, its placeholders (`<ROLE>`, `<SERVICE>`) standing for one word."""
    return re.compile(
        "".join(
            "[A-Z0-9]+" if part.startswith("<") else re.escape(part)
            for part in re.split(r"(<[A-Z]+>)", name)
        )
    )


def is_read_literally(name: str) -> bool:
    """Whether a settings class or a by-hand read names it (a placeholder: names like it)."""
    sample = re.sub(r"<[A-Z]+>", "X", name)
    return sample in read_variables() or any(
        as_pattern(name).fullmatch(v) for v in read_variables()
    )


def is_read(name: str) -> bool:
    """Whether some code reads this documented name (or, with a placeholder, names like it)."""
    sample = re.sub(r"<[A-Z]+>", "X", name)
    pattern = as_pattern(name)
    return (
        sample in read_variables()
        or any(p.fullmatch(sample) for p in read_patterns())
        or any(pattern.fullmatch(v) for v in read_variables())
    )


def documented(text: str) -> set[str]:
    """Every variable a text names (placeholders kept), the table's `/ _SUFFIX` shorthand
    resolved against the name before it."""
    written = set(re.findall(r"SIDEKICK_[A-Z0-9_<>]+", text))
    # A provider's own variable (OPENAI_API_KEY, BRAVE_SEARCH_API_KEY, ...) documented by name.
    written |= {n for n in read_variables() if not n.startswith("SIDEKICK_") and n in text}
    for group in re.findall(r"`SIDEKICK_[A-Z0-9_<>]+`(?:\s*/\s*`_[A-Z0-9_]+`)+", text):
        written.update(abbreviated_names(group, (is_read_literally, is_read)))
    return written


def undocumented(variables: set[str], docs: set[str]) -> set[str]:
    patterns = [as_pattern(d) for d in docs if "<" in d]
    return {v for v in variables if v not in docs and not any(p.fullmatch(v) for p in patterns)}
