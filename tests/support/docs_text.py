"""Reading the README and docs/ as a program can: sections, table rows, the configuration
table's shorthand for a group of variables, and a default as the docs write it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = {p.name: p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}


def section(text: str, heading: str) -> str:
    """From the line `heading` to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading)
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if re.match(rf"#{{1,{level}}} ", lines[i]) and not _in_code(lines, i)
        ),
        len(lines),
    )
    return "\n".join(lines[start:end])


def _in_code(lines: list[str], index: int) -> bool:
    return sum(1 for line in lines[:index] if line.lstrip().startswith("```")) % 2 == 1


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row, header and separator rows left out."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", line):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return [r for r in rows if r[0] not in {"Variable", "Metric", "Subject (under the namespace)"}]


def abbreviated_names(cell: str, known: tuple[Callable[[str], bool], ...]) -> list[str]:
    """The variables one table cell names: `SIDEKICK_LLM_BASE_URL` / `_API_KEY` / `_MODEL` is
    three, a `_SUFFIX` standing for the first name with its last word or two replaced (or with
    the suffix added: `SIDEKICK_MAX_CONNECTIONS` / `_PER_CLIENT`), whichever the code reads
    (`known`: tests of that, strongest first)."""
    names: list[str] = []
    for token in re.findall(r"`([^`]+)`", cell):
        if token.startswith("SIDEKICK_") or not names:
            if re.fullmatch(r"[A-Z][A-Z0-9_<>]*", token):
                names.append(token)
            continue
        if not re.fullmatch(r"_[A-Z0-9_]+", token):
            continue
        words = names[0].split("_")
        candidates = ["_".join(words[:-1]) + token, "_".join(words[:-2]) + token, names[0] + token]
        # The first candidate the strongest test knows (a literal name before a pattern).
        real = [c for test in known for c in candidates if test(c)]
        names.append((real or candidates)[0])
    return names


def code_default(value: object) -> str | None:
    """A field's default as the docs would write it; None where it is computed at run time."""
    if value is None:
        return None
    if value == "":
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
