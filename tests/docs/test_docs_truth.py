"""The README and docs/ say what the code does: every setting the code reads is in the
configuration reference's tables (docs/configuration.md, with the code's default where they give
one), every `sidekick` flag they name exists and every one the CLI takes is named, every command
has its entry in docs/commands.md, every repository path, link and test they cite exists, every
metric a service registers is in the operations guide's table (and nothing else is), and every
bus subject is in the architecture guide's table of the bus. Each check reads the code's own
structure, so a new setting, flag, metric or subject fails here until it is documented."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from contracts import subjects
from services.cli.main import _parser
from services.runtime.base.settings import Settings
from services.workers.settings import WorkerSettings
from services.workers.tools.settings import ToolsSettings
from tests.support.code_reads import (
    SETTINGS_CLASSES,
    documented,
    env_names,
    environ_reads,
    is_read,
    is_read_literally,
    undocumented,
)
from tests.support.docs_text import (
    DOCS,
    README,
    abbreviated_names,
    code_default,
    section,
    table_rows,
)

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]


REFERENCE = ("configuration.md", "## Every variable")  # the tables of every variable


def test_every_setting_the_code_reads_is_documented_and_every_documented_one_is_read() -> None:
    in_table = documented(section(DOCS[REFERENCE[0]], REFERENCE[1]))
    shared = {v for v in env_names(Settings) if v.startswith("SIDEKICK_")}
    kinds = {v for v in env_names(Settings) if not v.startswith("SIDEKICK_")}
    kinds |= set(env_names(WorkerSettings)) | set(env_names(ToolsSettings))
    missing = sorted(
        [f"{v} (Settings: the configuration reference)" for v in undocumented(shared, in_table)]
        + [
            f"{v} (a worker's or a provider's setting: the configuration reference)"
            for v in undocumented(kinds, in_table)
        ]
        + [
            f"{v} (read from the environment: the configuration reference)"
            for v in undocumented(environ_reads(), in_table)
        ]
    )
    assert not missing, f"read by the code, not documented: {missing}"

    # Names the docs use for what is not a setting of a Sidekick process: stream names (the
    # namespace upper-cased), and the NATS passwords the server and `sidekick up` hand around.
    streams = {getattr(subjects.DEFAULT, n) for n in dir(subjects.DEFAULT) if n.endswith("_stream")}
    unknown = sorted(
        name
        for name in documented(README + "".join(DOCS.values()))
        if not is_read(name)
        and name not in streams
        and not name.startswith("SIDEKICK_NATS_PASSWORD_")
        and not name.endswith("_")
    )
    assert not unknown, f"documented, but no code reads them: {unknown}"


def documented_defaults() -> list[tuple[str, str]]:
    """(variable, default as written) from the configuration reference's rows, and every
    "`SIDEKICK_X` (default…" in the README and docs/; a default in backticks or a plain number."""
    pairs: list[tuple[str, str]] = []
    for row in table_rows(section(DOCS[REFERENCE[0]], REFERENCE[1])):
        if len(row) < 2:
            continue
        names = abbreviated_names(row[0], (is_read_literally, is_read))
        cells = [c.strip() for c in row[1].split(" / ")]
        if len(cells) != len(names):
            continue  # a prose default ("shared values"): nothing to compare
        pairs += [(n, c) for n, c in zip(names, cells, strict=True) if "<" not in n]
    pattern = r"`(SIDEKICK_[A-Z0-9_]+)`\s\((?:default )?(`[^`]*`|[\d,.]+(?: MB| KiB| h)?)"
    pairs += re.findall(pattern, README + "".join(DOCS.values()))
    return pairs


def same_number(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def test_every_documented_default_is_the_codes() -> None:
    defaults: dict[str, object] = {}
    for cls in SETTINGS_CLASSES:
        defaults.update(env_names(cls))
    wrong = []
    for name, written in documented_defaults():
        if name not in defaults:
            continue  # read by hand (its default is in its code); the test above checks it
        expected = code_default(defaults[name])
        value = written.split(" ")[0]
        if value.startswith("`"):
            value = written.split("`")[1]
        elif re.fullmatch(r"[\d,.]+", value):
            value = value.replace(",", "")
            for unit, times in ((" MB", 1_000_000), (" KiB", 1024), (" h", 3600)):
                if written.endswith(unit):
                    value = str(int(float(value) * times))
        if expected is None:
            continue  # computed at run time (a role's model, a folder under the data dir)
        if value != expected and not same_number(value, expected):
            wrong.append(f"{name}: the docs say {written}, the code {expected}")
    assert not wrong, wrong


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


def command_lines(text: str) -> list[tuple[str, str]]:
    """(subcommand, the rest) of each `sidekick <cmd> …` in backticks or a code block line."""
    spans = re.findall(r"`(sidekick [^`]+)`", text)
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced and line.lstrip().startswith("sidekick "):
            spans.append(line.split("#")[0].strip())
    out = []
    for span in spans:
        words = span.split()
        if len(words) > 1 and not words[1].startswith("-"):
            out.append((words[1], " ".join(words[2:])))
    return out


def test_every_sidekick_flag_the_docs_name_exists() -> None:
    commands = subcommands()
    wrong = []
    for where, text in {"README.md": README, **DOCS}.items():
        for command, rest in command_lines(text):
            if command not in commands:
                if re.fullmatch(r"[a-z][a-z-]*", command):
                    wrong.append(f"{where}: `sidekick {command}` is no command")
                continue
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
                if flag not in flags(commands[command]):
                    wrong.append(f"{where}: `sidekick {command}` has no {flag}")
    assert not wrong, wrong


def test_every_command_is_in_the_commands_guide_and_every_flag_somewhere() -> None:
    """Each command has its entry in docs/commands.md's Commands section; each of its flags is
    named there or in a `sidekick <command> …` line elsewhere in the README or docs/."""
    listed = {command for command, _ in command_lines(section(DOCS["commands.md"], "## Commands"))}
    named: dict[str, set[str]] = {}
    for text in (README, *DOCS.values()):
        for command, rest in command_lines(text):
            named.setdefault(command, set()).update(re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest))
    missing = []
    for command, parser in subcommands().items():
        if command not in listed:
            missing.append(f"sidekick {command} (no entry in docs/commands.md's Commands)")
        missing += [
            f"sidekick {command} {f}" for f in sorted(flags(parser) - named.get(command, set()))
        ]
    assert not missing, f"the CLI takes these, the README and docs/ do not say so: {missing}"


ROOTED = ("services/", "contracts/", "deploy/", "docs/", "tests/", "bench/", "scripts/", ".ci/")


def cited_paths(text: str) -> set[str]:
    """Repository paths in backticks or Markdown links, placeholders (`<kind>`) as globs."""
    found = set(re.findall(r"`([^`\s]+)`", text)) | set(re.findall(r"\]\(([^)\s#]+)", text))
    paths = set()
    for token in found:
        path = token.split(":")[0].rstrip(".,")
        if path.startswith(ROOTED) or path in {"Dockerfile", "pyproject.toml", "README.md"}:
            paths.add(re.sub(r"<[^>]+>", "*", path))
    return paths


def test_every_repository_path_the_docs_cite_exists() -> None:
    # What runs write (bench results, test artifacts) is ignored by git, not committed.
    outputs = tuple(
        line.strip().rstrip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if "/" in line
    )
    missing = []
    for where, text in {"README.md": README, **DOCS}.items():
        base = ROOT if where == "README.md" else ROOT / "docs"
        for path in sorted(cited_paths(text)):
            if path.startswith(outputs):
                continue
            # A Markdown link in docs/ is relative to docs/; a path in backticks to the root.
            if not (any(ROOT.glob(path)) or (ROOT / path).exists() or (base / path).exists()):
                missing.append(f"{where}: {path}")
    assert not missing, f"cited, but not in the repository: {missing}"


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (code blocks' lines are no headings)."""
    found = set()
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#+ (.+)", line)):
            words = re.sub(r"[^\w\- ]", "", heading[1].lower())
            found.add(words.replace(" ", "-"))
    return found


def test_every_link_in_the_readme_and_docs_leads_somewhere_in_the_repository() -> None:
    """Links are relative (nothing outside the repository), to a file that exists, and to a
    heading that exists when they name one; the README's lead into docs/ (or to itself)."""
    wrong = []
    for where, text in {"README.md": README, **DOCS}.items():
        base = ROOT if where == "README.md" else ROOT / "docs"
        links = re.findall(r"\]\(([^)\s]+)\)", text)
        assert where != "README.md" or links, "the README links into docs/"
        for link in links:
            target, _, anchor = link.partition("#")
            path = (base / target).resolve() if target else base / where
            if re.match(r"[a-z]+:", link):
                wrong.append(f"{where}: {link} leads outside the repository")
            elif not path.exists():
                wrong.append(f"{where}: {link}: no such file")
            elif where == "README.md" and target and not target.startswith("docs/"):
                wrong.append(f"{where}: {link}: the README links into docs/ only")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
                wrong.append(f"{where}: {link}: no such heading")
    assert not wrong, wrong


def test_every_test_the_docs_name_exists() -> None:
    defined = {
        node.name
        for path in (ROOT / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", README + "".join(DOCS.values())))
    assert not named - defined, f"named in the docs, no such test: {sorted(named - defined)}"


def registered_metrics() -> dict[str, set[str]]:
    """Every Prometheus metric the services define (name: labels), read from the source: made
    by prometheus_client's classes or by services/runtime/base/metrics.py's `counter`,
    `histogram` and `gauge`, with the labels as the third argument."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "").lower()
                in {"counter", "histogram", "gauge", "summary"}
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("sidekick_")
            ):
                labels = node.args[2] if len(node.args) > 2 else None
                out[str(node.args[0].value)] = {
                    str(e.value) for e in getattr(labels, "elts", []) if isinstance(e, ast.Constant)
                }
    return out


def test_the_operations_guides_metrics_table_is_what_the_services_register() -> None:
    table = section(DOCS["operations.md"], "### Metrics")
    listed: dict[str, set[str]] = {}
    for row in table_rows(table):
        match = re.fullmatch(r"`(sidekick_[a-z_]+)(?:\{([^}]*)\})?`", row[0].strip())
        if match:
            listed[match[1]] = {x.strip() for x in (match[2] or "").split(",") if x.strip()}
    registered = registered_metrics()
    assert registered, "no metric found in services/: the source scan is broken"
    wrong = [f"{m}: not in the table" for m in sorted(set(registered) - set(listed))]
    wrong += [f"{m}: no service registers it" for m in sorted(set(listed) - set(registered))]
    wrong += [
        f"{m}: the table says labels {sorted(listed[m])}, the code {sorted(labels)}"
        for m, labels in registered.items()
        if m in listed and listed[m] != labels
    ]
    assert not wrong, wrong


def test_every_bus_subject_and_stream_is_in_the_architecture_guides_table_of_the_bus() -> None:
    table = section(DOCS["architecture.md"], "## The bus")
    shown: set[str] = set()
    for row in table_rows(table):
        names = re.findall(r"`([^`]+)`", row[0])
        for i, name in enumerate(names):
            if name.startswith(".") and i:  # `out.<request_id>.chunk` / `.progress`
                name = names[0].rsplit(".", 1)[0] + name
            shown.add(re.sub(r"<[^>]+>", "<>", name))
    templates = {
        re.sub(r"\{[^}]+\}", "<>", value)
        for name, value in vars(subjects).items()
        if name.isupper() and isinstance(value, str) and "." in value and "{what}" not in value
    }
    assert not templates - shown, f"subjects not in the bus table: {sorted(templates - shown)}"
    streams = {getattr(subjects.DEFAULT, n) for n in dir(subjects.DEFAULT) if n.endswith("_stream")}
    assert not {s for s in streams if s not in table}, "a stream is missing from the bus table"


def test_the_nats_users_table_gives_each_role_its_publishes_and_buckets() -> None:
    from services.runtime.bus.topology import roles

    s = subjects.DEFAULT
    rows = {
        row[0].strip("`"): row
        for row in table_rows(section(DOCS["nats-security.md"], "## The configuration"))
        if len(row) == 6
    }
    wrong = []
    for service, role in roles(s).items():
        if service not in rows:
            wrong.append(f"{service}: no row")
            continue
        publishes, reads = rows[service][1], rows[service][4]
        shown = set()
        for pattern in re.findall(r"`([^`]+)`", publishes):
            head, _, tail = pattern.replace("\\|", "|").rpartition(".")
            shown |= {f"{head}.{t}" if head else t for t in tail.split("|")}
        # Readiness (health.ping / health.pong.<service>) is a sentence under the table.
        readiness = (s.ping, s.pong(service))
        for subject in (p for p in role.publish if p not in readiness):
            relative = subject.removeprefix(f"{s.namespace}.")
            if relative not in shown:
                wrong.append(f"{service}: publishes {relative}, the table does not say so")
        buckets = set(re.findall(r"`([a-z_]+)`", reads))
        wrong += [
            f"{service}: reads bucket {b}, not in the table" for b in role.reads if b not in buckets
        ]
    assert not wrong, wrong


def test_every_setting_deploy_sets_is_one_the_code_reads() -> None:
    """The manifests' ConfigMap literals (`SIDEKICK_X=...`) and container env names."""
    streams = {getattr(subjects.DEFAULT, n) for n in dir(subjects.DEFAULT) if n.endswith("_stream")}
    set_by_deploy = {
        name
        for path in (ROOT / "deploy").rglob("*.yaml")
        for name in re.findall(r"(?:- |name: )(SIDEKICK_[A-Z0-9_]+)\b", path.read_text())
    }
    unread = sorted(
        n
        for n in set_by_deploy - streams
        if not is_read(n) and not n.startswith("SIDEKICK_NATS_PASSWORD_")
    )
    assert set_by_deploy, "nothing found in deploy/: the scan is broken"
    assert not unread, f"deploy/ sets them, no code reads them: {unread}"


def test_the_maps_of_the_code_name_every_command_and_the_eval_cases_count() -> None:
    commands = set(subcommands())
    cli_row = next(r for r in table_rows(section(README, "## Map of the code")) if "cli/" in r[0])
    floor = next(
        line for line in DOCS["architecture.md"].splitlines() if line.startswith("services/cli/")
    )
    wrong = [f"README's map: {c}" for c in sorted(commands) if f"`{c}`" not in cli_row[1]]
    wrong += [
        f"architecture.md's floors: {c}"
        for c in sorted(commands)
        if c not in re.split(r"[\s,:]+", floor)
    ]
    assert not wrong, f"commands the maps of the code leave out: {wrong}"
    cases = (ROOT / "services/evals/cases.jsonl").read_text().splitlines()
    said = re.search(r"`services/evals/cases\.jsonl`, (\d+) cases", DOCS["eval.md"])
    assert said, "docs/eval.md no longer says how many eval cases there are"
    assert int(said[1]) == len([c for c in cases if c.strip()])
