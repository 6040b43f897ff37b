"""The A2A conformance kit (a2aproject/a2a-tck) against `sidekick up`, when the kit is present.

The kit is not on PyPI, so it is not part of the test command: check it out anywhere, give it a
virtualenv of its own (`python -m venv /tmp/tck-venv && /tmp/tck-venv/bin/pip install -e .` in
the kit), then

    python -m bench.a2a_tck --kit /tmp/a2a-tck --kit-python /tmp/tck-venv/bin/python

starts the bench's fake model (bench/fake_model.py) and `sidekick up` on a free port with a data
dir of its own, runs `run_tck.py --category mandatory` (or `--category`) against it, prints the
kit's counts (passed, failed, skipped) and the failed tests, and stops everything. The card is
asked for at `http://localhost:<port>` (not 127.0.0.1: the kit's sensitive-information check
counts a card URL on 127.0.0.1 as a leak, though it lets `localhost` pass). docs/protocols.md
has the last figures and why each failure left is the kit's own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.system import FakeModel
from services.runtime.base.children import free_port, role_models

ROOT = Path(__file__).resolve().parent.parent


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"sidekick up stopped (exit {proc.returncode})")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"sidekick up was not ready in {timeout:.0f} s")


def counts(output: str) -> dict[str, int]:
    """pytest's closing line of the kit's run: passed, failed, skipped (0 when absent)."""
    found = {"passed": 0, "failed": 0, "skipped": 0}
    for line in output.splitlines()[::-1]:
        if re.search(r"\d+ (passed|failed)", line) and " in " in line:
            for n, word in re.findall(r"(\d+) (passed|failed|skipped)", line):
                found[word] = int(n)
            break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kit", type=Path, default=Path(os.environ.get("A2A_TCK_DIR", "")))
    parser.add_argument("--kit-python", default=os.environ.get("A2A_TCK_PYTHON", sys.executable))
    parser.add_argument("--category", default="mandatory")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the kit")
    parser.add_argument("--verbose", action="store_true", help="each test's result in the log")
    args = parser.parse_args()
    if not (args.kit / "run_tck.py").is_file():
        raise SystemExit("no A2A conformance kit: give --kit (a checkout of a2aproject/a2a-tck)")
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="sidekick-tck-"))
    model = FakeModel().start()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SIDEKICK_LLM_BASE_URL": model.base_url,
        "SIDEKICK_LLM_API_KEY": "fake",
        "SIDEKICK_CACHE_ENABLED": "false",
        "SIDEKICK_EMBEDDINGS_BASE_URL": model.base_url,
        # The kit is one client that leaves many tasks open at once: not a test of the
        # per-principal limits, which would refuse it (429) on a busy machine.
        "SIDEKICK_MAX_CONCURRENT_REQUESTS": "200",
        "SIDEKICK_RATE_LIMIT_PER_MINUTE": "6000",
        **role_models("bench"),
    }
    up = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up", "--port", str(port), "--data-dir", str(data)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(data / "up.log", "wb"),  # noqa: SIM115 (lives as long as the process)
    )
    try:
        url = f"http://localhost:{port}"
        wait_ready(url, up, 120.0)
        run = subprocess.run(
            [args.kit_python, "run_tck.py", "--sut-url", f"{url}/a2a", "--category", args.category]
            + (["--verbose"] if args.verbose else []),
            cwd=args.kit,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
        )
        output = run.stdout + run.stderr
        (data / "tck.log").write_text(output)
        failed = sorted(set(re.findall(r"^FAILED (\S+::\S+)", output, re.MULTILINE)))
        print(json.dumps({"category": args.category, **counts(output), "failures": failed}))
        print(f"the kit's output: {data / 'tck.log'}; Sidekick's log: {data / 'up.log'}")
    finally:
        up.terminate()
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()
        model.stop()


if __name__ == "__main__":
    main()
