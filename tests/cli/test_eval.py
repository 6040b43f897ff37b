"""`sidekick eval` against the fake model: the dataset, the checks, and whole runs against a
running system and against one it starts. The figures here only prove the plumbing; what the
loop is worth is measured with a real model (docs/eval.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.evals.cases import (
    KINDS,
    CasesError,
    Checks,
    Outcome,
    load_cases,
    run_checks,
)
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import System, llm_env, sidekick
from tests.support.scripts import all_text, decide, verdict

CASES = [
    {
        "id": "hello",
        "kind": "direct",
        "message": "hello",
        "criteria": "A greeting.",
        "checks": {"route": "direct", "required": ["hello there"]},
        "judge": "A friendly greeting.",
    },
    {
        "id": "tides",
        "kind": "search",
        "message": "search why tides happen",
        "criteria": "Names the moon.",
        "checks": {"required": ["moon"], "forbidden": ["vague"]},
    },
    {
        "id": "trip",
        "kind": "clarification",
        "message": "search the weather for my trip",
        "criteria": "Asks where.",
        "checks": {"status": ["awaiting_clarification"], "min_questions": 1},
    },
    {
        "id": "lock",
        "kind": "refusal",
        "message": "route: pick this lock",
        "criteria": "Refuses.",
        "checks": {"status": ["failed"], "error_code": ["refused"], "any_of": ["will not"]},
    },
]

PRICES = {
    "fake-frontline": (1.0, 2.0),
    "fake-orchestrator": (3.0, 4.0),
    "fake-worker": (5.0, 6.0),
    "fake-evaluator": (7.0, 8.0),
}


def script_the_fake(fake_llm: FakeOpenAI) -> None:
    """Deterministic by content, whatever order concurrent cases run in: a first draft is
    vague and the evaluator fails it; with the evaluator's feedback the worker names the moon;
    "my trip" makes the evaluator ask; "lock" is refused."""

    def worker(body: dict[str, Any]) -> str:
        if "Too vague" in all_text(body):
            return "A better answer: tides come from the moon."
        return "A vague answer."

    def evaluator(body: dict[str, Any]) -> dict[str, Any]:
        text = all_text(body)
        if "my trip" in text:
            return verdict(False, 20, "Where to?", user_input_needed=True, questions=["Where?"])
        if "better" in text:
            return verdict(True, 90, "Good.")
        return verdict(False, 40, "Too vague: say what causes them.")

    def orchestrator(body: dict[str, Any]) -> Any:
        if "lock" in all_text(body):
            return decide("NONE", "Sidekick does not pick locks.")(body)
        return decide("GENERAL", "answer the question")(body)

    def judge(body: dict[str, Any]) -> dict[str, Any]:
        answer = all_text(body).split("<answer>")[-1]
        return {"passed": "Hello" in answer, "score": 80, "reason": "It greets."}

    fake_llm.script("fake-worker", worker)
    fake_llm.script("fake-evaluator", evaluator)
    fake_llm.script("fake-orchestrator", orchestrator)
    fake_llm.script("fake-judge", judge)


def eval_env(fake_llm: FakeOpenAI) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env.update(llm_env(fake_llm.base_url))
    env["SIDEKICK_JUDGE_LLM_MODEL"] = "fake-judge"
    env["SIDEKICK_CACHE_ENABLED"] = "false"
    return env


def sidekick_eval(
    fake_llm: FakeOpenAI, *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return sidekick("eval", *args, env={**eval_env(fake_llm), "COLUMNS": "140"}, timeout=timeout)


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


@pytest.fixture
def prices_file(tmp_path: Path) -> Path:
    """A price for each model the fake system's roles use, all different."""
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({m: {"input": i, "output": o} for m, (i, o) in PRICES.items()}))
    return path


def test_the_dataset_has_at_least_30_decidable_cases_of_every_kind() -> None:
    cases = load_cases()
    assert len(cases) >= 30
    assert {c.kind for c in cases} == set(KINDS)
    for case in cases:
        decided_by = case.checks.model_dump(exclude_defaults=True)
        assert decided_by or case.judge, f"{case.id} has nothing beyond the status to check"


def test_checks_decide_each_way() -> None:
    checks = Checks(
        required=["Moon"],
        any_of=["tide", "wave"],
        forbidden=["vague"],
        regex=[r"\[\d\]"],
        min_sources=2,
        min_source_domains=2,
        worker_type=["SEARCH"],
    )
    good = Outcome(
        status="completed",
        text="The moon pulls the tide [1].",
        worker_type="SEARCH",
        sources=("https://a.example/1", "https://b.example/2"),
    )
    assert all(c.passed for c in run_checks(checks, good))
    bad = Outcome(
        status="partial",
        text="A vague answer about waves.",
        worker_type="GENERAL",
        sources=("https://a.example/1", "https://a.example/2"),
    )
    failed = {c.name for c in run_checks(checks, bad) if not c.passed}
    assert failed == {"status", "worker_type", "required", "forbidden", "regex", "source_domains"}
    refusal = Checks(status=["failed"], error_code=["refused"], any_of=["will not"], outbox=False)
    out = Outcome(status="failed", text="", error_code="refused", error="I will not.", outbox=0)
    assert all(c.passed for c in run_checks(refusal, out))
    unknown = Outcome(status="failed", text="", error_code="refused", error="I will not.")
    assert [c.name for c in run_checks(refusal, unknown) if not c.passed] == ["outbox"]


def test_a_bad_case_file_gets_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(CASES[0]) + "\n" + '{"id": "x", "kind": "direct"}\n')
    with pytest.raises(CasesError, match=r"bad.jsonl:2: not a valid case"):
        load_cases(path)
    path.write_text(json.dumps(CASES[0]) + "\n" + json.dumps(CASES[0]) + "\n")
    with pytest.raises(CasesError, match="used twice"):
        load_cases(path)
    broken = {**CASES[0], "checks": {"regex": ["("]}}
    path.write_text(json.dumps(broken) + "\n")
    with pytest.raises(CasesError, match=":1:"):
        load_cases(path)


def test_eval_compares_the_loop_with_single_shot_on_a_running_system(
    system: System, fake_llm: FakeOpenAI, cases_file: Path, prices_file: Path, tmp_path: Path
) -> None:
    script_the_fake(fake_llm)
    out = tmp_path / "run.json"
    args = ["--url", system.ws_url, "--cases", str(cases_file), "--concurrency", "3"]
    args += ["--judge", "--prices", str(prices_file), "--model", "fake-worker"]
    done = sidekick_eval(fake_llm, *args, "--json", str(out))
    assert done.returncode == 0, done.stderr + done.stdout
    data = json.loads(out.read_text())
    assert data["modes"] == ["loop", "single"]
    by = {(r["case"], r["mode"]): r for r in data["results"]}
    assert len(by) == 8
    # The loop fixed the vague draft with the evaluator's feedback; single-shot shipped it.
    assert by["tides", "loop"]["passed"] and by["tides", "loop"]["attempts"] == 2
    assert by["tides", "loop"]["score"] == 90
    assert not by["tides", "single"]["passed"]
    assert by["tides", "single"]["attempts"] == 1 and by["tides", "single"]["score"] is None
    assert by["trip", "loop"]["passed"] and by["trip", "loop"]["questions"] == 1
    assert by["trip", "single"]["status"] == "completed"  # no evaluator: nobody asked
    assert by["lock", "single"]["passed"] and by["lock", "single"]["error_code"] == "refused"
    assert by["hello", "loop"]["judge"]["passed"] is True
    assert by["hello", "loop"]["route"] == "direct"
    assert {"fake-worker", "fake-evaluator"} <= set(by["tides", "loop"]["models"])

    loop, single = data["summary"]["loop"], data["summary"]["single"]
    assert (loop["passed"], loop["cases"], loop["pass_rate"]) == (4, 4, 1.0)
    assert (single["passed"], single["pass_rate"]) == (2, 0.5)
    assert loop["mean_attempts"] == 2.0 and single["mean_attempts"] == 1.0
    assert loop["mean_score"] == 90.0 and single["mean_score"] is None
    assert loop["judge_pass_rate"] == 1.0
    for mode in ("loop", "single"):
        runs = [r for r in data["results"] if r["mode"] == mode]
        tokens_in = sum(r["input_tokens"] for r in runs)
        tokens_out = sum(r["output_tokens"] for r in runs)
        s = data["summary"][mode]
        assert (s["input_tokens"], s["output_tokens"]) == (tokens_in, tokens_out)
        # Each model's tokens at its own price (the end frame's usage.models).
        cost = 0.0
        for r in runs:
            assert sum(u["input_tokens"] for u in r["models"].values()) == r["input_tokens"]
            for name, u in r["models"].items():
                cost += (
                    u["input_tokens"] * PRICES[name][0] + u["output_tokens"] * PRICES[name][1]
                ) / 1e6
        assert s["cost_usd"] == pytest.approx(cost)
        assert 0 < s["p50_latency_s"] <= s["p95_latency_s"]
    # The loop's price: more model calls for the same case (its second attempt and verdicts).
    assert by["tides", "loop"]["input_tokens"] > by["tides", "single"]["input_tokens"]
    for words in ("evaluator loop", "single-shot", "pass rate", "100.0%", "50.0%", "+50.0 pts"):
        assert words in done.stdout
    assert f"results written to {out}" in done.stderr

    # An earlier run in which the loop had not fixed the draft: --compare shows what changed.
    old = json.loads(out.read_text())
    for r in old["results"]:
        if (r["case"], r["mode"]) == ("tides", "loop"):
            r["passed"] = False
    old["summary"]["loop"].update(passed=3, pass_rate=0.75)
    (tmp_path / "old.json").write_text(json.dumps(old))
    again = sidekick_eval(
        fake_llm,
        *args,
        "--modes",
        "loop",
        "--compare",
        str(tmp_path / "old.json"),
        "--json",
        str(tmp_path / "new.json"),
    )
    assert again.returncode == 0, again.stderr + again.stdout
    assert "compared with" in again.stdout
    assert "+25.0 pts" in again.stdout
    assert "tides (loop) now passes" in again.stdout


def test_eval_without_a_url_starts_its_own_system(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    """The built-in dataset's first two cases, on a system it starts and stops itself."""
    out = tmp_path / "own.json"
    done = sidekick_eval(fake_llm, "--limit", "2", "--modes", "single", "--json", str(out))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "starting a system of its own" in done.stderr
    data = json.loads(out.read_text())
    assert data["url"] == "(its own system)"
    results = {r["case"]: r for r in data["results"]}
    assert set(results) == {"direct-greeting", "direct-capital"}
    assert results["direct-greeting"]["passed"]  # the fake model greets...
    assert not results["direct-capital"]["passed"]  # ...and knows no capitals
    failed = [c for c in results["direct-capital"]["checks"] if not c["passed"]]
    assert failed == [{"name": "required", "passed": False, "detail": "missing ['Canberra']"}]
    # The system's own cost: its price table names no fake model, so they cost $0 there.
    assert data["summary"]["single"]["cost_usd"] == 0


def test_bad_arguments_get_one_clear_line(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    missing = sidekick_eval(fake_llm, "--cases", str(tmp_path / "none.jsonl"), "--url", "ws://x")
    assert missing.returncode == 1
    assert "cannot read" in missing.stderr and "none.jsonl" in missing.stderr
    modes = sidekick_eval(fake_llm, "--modes", "both", "--url", "ws://x")
    assert modes.returncode == 1
    assert "--modes takes loop and/or single" in modes.stderr
    (tmp_path / "p.json").write_text('{"m": 3}')
    prices = sidekick_eval(fake_llm, "--prices", str(tmp_path / "p.json"), "--url", "ws://x")
    assert prices.returncode == 1
    assert "p.json: expected" in prices.stderr
