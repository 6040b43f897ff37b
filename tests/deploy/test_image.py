"""CI checks of the container image's Dockerfile, offline: clean under hadolint, multi-stage,
non-root, and its build context holds what it copies."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.deploy_support import (
    run,
    tool,
)
from tests.support.harness import ROOT

# --- Container image --------------------------------------------------------------------------


def test_dockerfile_is_clean_under_hadolint() -> None:
    out = run(tool("hadolint"), "--no-color", "Dockerfile")
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_fails_a_careless_dockerfile(tmp_path: Path) -> None:
    """hadolint is live: the checks above would catch these."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    out = run(tool("hadolint"), "--no-color", str(bad))
    assert out.returncode != 0
    assert "DL3007" in out.stdout and "DL3008" in out.stdout


def stages(dockerfile: str) -> dict[str, tuple[str, str]]:
    """Stage name -> (what it is FROM, its instructions)."""
    parts = re.split(r"^FROM (\S+) AS (\S+)$", dockerfile, flags=re.M)
    return {
        name: (base, body)
        for base, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True)
    }


def test_the_image_is_multi_stage_non_root_and_its_context_has_what_it_copies() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    by_name = stages(dockerfile)
    default = list(by_name)[-1]
    chain, stage = [], default
    while stage in by_name:
        chain.append(stage)
        stage = by_name[stage][0]
    assert stage == "python:3.11-slim", "the image is built on python:3.11-slim"
    for name in chain:
        body = by_name[name][1]
        assert "pip install" not in body and "apt-get" not in body, f"{name} builds nothing"
    for target in (default, "browser"):
        body = by_name[target][1]
        assert re.findall(r"^USER (\S+)", body, re.M)[-1] == "10001:10001", target
    assert "--from=build" in by_name["base"][1], "the package comes from the build stage"
    assert 'ENTRYPOINT ["sidekick"]' in by_name["base"][1]
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M):
        for source in sources.split():
            assert (ROOT / source).exists(), source
            assert source.rstrip("/") in allowed, f".dockerignore keeps {source} out of the context"
