"""The `real_model` tier's server: the tiny local model (services/cli/localmodel.py), started once
per test session, its output in a log file the tests read (uvicorn's access lines say what the
server was asked and answered). A missing `local` extra is an error, never a skip."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.cli.localmodel import CHAT_MODEL, LocalModel
from services.runtime.base.children import die_with_parent, stop
from services.runtime.base.settings import LLMConfig


@dataclass
class RealModel:
    local: LocalModel
    log_dir: Path

    def log(self, name: str = "local-model") -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def answered(self, status: int) -> int:
        """How many chat requests the chat server answered with `status` so far."""
        return sum(
            1
            for line in self.log().splitlines()
            if "POST /v1/chat/completions" in line and f'" {status}' in line
        )

    def config(self, role: str = "worker", **fields: object) -> LLMConfig:
        return LLMConfig(role, self.local.chat_url, None, CHAT_MODEL, **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealModel]:
    log_dir = tmp_path_factory.mktemp("local-model")
    local = LocalModel()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, args in local.commands().items():
            with open(log_dir / f"{name}.log", "ab") as out:
                procs[name] = subprocess.Popen(
                    args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
                )
        local.wait_ready(procs)
        yield RealModel(local, log_dir)
    finally:
        stop(procs.values())
