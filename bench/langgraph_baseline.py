"""The in-process baseline: the Sidekick seed's worker -> evaluator loop as a LangGraph graph,
with `openai` calls to the same fake model, under the same closed-loop concurrent workload.

So that both sides make the same model calls per request, the graph also has the frontline's
call (one streamed call that answers or calls `route`, as Sidekick's) and the orchestrator's
decision in front of the seed's loop:

    START -> frontline -> orchestrator -> worker -> evaluator -> END (passed or out of attempts)
                 |                          ^            |
                 +-> END (answered)         +-- retry ---+

State is kept per session by LangGraph's in-memory checkpointer (as the seed does), one
`AsyncOpenAI` client is shared, the prompts carry the same text and markers as Sidekick's so
the fake model answers both alike. Runs in its own process;
`python -m bench.langgraph_baseline --base-url ... --levels 50,200` prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import random
import sys
import time
import uuid
from collections import Counter
from typing import Annotated, Any, TypedDict

import openai
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from bench.client import EXPECT, PATHS, Outcome, unique
from bench.load import Window, run_until, warmup_seconds, window_figures
from bench.system import RssSampler
from contracts.decisions import OrchestratorDecision, Verdict
from services.evaluator.prompts import SYSTEM as EVALUATOR_SYSTEM
from services.evaluator.prompts import judge_text
from services.frontline.prompts import ROUTE
from services.frontline.prompts import system as frontline_system
from services.orchestrator.prompts import request_text, system_prompt
from services.runtime.llm import response_format
from services.runtime.llm.choice import tool as route_tool
from services.workers.general import SYSTEM as WORKER_SYSTEM

MAX_ATTEMPTS = 3
HISTORY_TURNS = 4


class State(TypedDict, total=False):
    message: str
    history: Annotated[list[dict[str, str]], operator.add]
    route: bool
    reason: str
    task: str
    criteria: str
    attempt: int
    output: str
    feedback: str
    suggestions: list[str]
    passed: bool


def build_graph(client: openai.AsyncOpenAI) -> Any:
    async def structured(
        model: str, messages: list[dict[str, str]], schema: type[BaseModel]
    ) -> Any:
        resp = await client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            response_format=response_format(schema),  # type: ignore[arg-type]
        )
        return schema.model_validate_json(resp.choices[0].message.content or "")

    def recent(state: State) -> list[dict[str, str]]:
        return list(state.get("history", []))[-2 * HISTORY_TURNS :]

    async def frontline(state: State) -> State:
        # One streamed call, as Sidekick's frontline makes: the answer, or a `route` call.
        messages = [
            {"role": "system", "content": frontline_system("tools")},
            *recent(state),
            {"role": "user", "content": state["message"]},
        ]
        stream = await client.chat.completions.create(  # type: ignore[call-overload]
            model="bench-frontline",
            messages=messages,
            stream=True,
            tools=[route_tool(ROUTE)],
            tool_choice="auto",
        )
        text, arguments, called = "", "", False
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    called = True
                    arguments += (call.function.arguments or "") if call.function else ""
        if called:
            reason = str(json.loads(arguments or "{}").get("reason", ""))
            return {"route": True, "reason": reason, "attempt": 0}
        return {"route": False, "output": text, "passed": True, **_turn(state, text)}

    async def orchestrator(state: State) -> State:
        messages = [
            {"role": "system", "content": system_prompt(["GENERAL"])},
            *recent(state),
            {"role": "user", "content": request_text(state["message"], state["reason"], None)},
        ]
        decision = await structured("bench-orchestrator", messages, OrchestratorDecision)
        return {"task": decision.task_description, "criteria": decision.success_criteria}

    async def worker(state: State) -> State:
        attempt = state.get("attempt", 0) + 1
        prompt = (
            f"Task: {state['task']}\n\nThe user's message: {state['message']}\n\n"
            f"Success criteria: {state['criteria']}"
        )
        if attempt > 1:
            prompt += (
                f"\n\nThis is attempt {attempt}.\nYour previous answer was:\n{state['output']}"
                f"\nThe evaluator's feedback on it: {state['feedback']}"
                "\nProduce an improved answer that addresses the feedback."
            )
        messages = [
            {"role": "system", "content": WORKER_SYSTEM},
            *recent(state),
            {"role": "user", "content": prompt},
        ]
        resp = await client.chat.completions.create(
            model="bench-worker",
            messages=messages,  # type: ignore[arg-type]
        )
        return {"attempt": attempt, "output": resp.choices[0].message.content or ""}

    async def evaluator(state: State) -> State:
        transcript = "\n".join(f"{t['role'].upper()}: {t['content']}" for t in recent(state))
        text = judge_text(
            transcript=transcript or "(no earlier turns)",
            message=state["message"],
            task=state["task"],
            criteria=state["criteria"],
            output=state["output"],
            sources="(none)",
        )
        messages = [
            {"role": "system", "content": EVALUATOR_SYSTEM},
            {"role": "user", "content": text},
        ]
        verdict = await structured("bench-evaluator", messages, Verdict)
        update: State = {
            "passed": verdict.passed,
            "feedback": verdict.feedback,
            "suggestions": list(verdict.suggestions),
        }
        if verdict.passed or state["attempt"] >= MAX_ATTEMPTS:
            update.update(_turn(state, state["output"]))
        return update

    def after_frontline(state: State) -> str:
        return "orchestrator" if state["route"] else END

    def after_evaluator(state: State) -> str:
        return END if state["passed"] or state["attempt"] >= MAX_ATTEMPTS else "worker"

    graph = StateGraph(State)
    graph.add_node("frontline", frontline)
    graph.add_node("orchestrator", orchestrator)
    graph.add_node("worker", worker)
    graph.add_node("evaluator", evaluator)
    graph.add_edge(START, "frontline")
    graph.add_conditional_edges("frontline", after_frontline, ["orchestrator", END])
    graph.add_edge("orchestrator", "worker")
    graph.add_edge("worker", "evaluator")
    graph.add_conditional_edges("evaluator", after_evaluator, ["worker", END])
    return graph.compile(checkpointer=InMemorySaver())


def _turn(state: State, answer: str) -> State:
    return {
        "history": [
            {"role": "user", "content": state["message"]},
            {"role": "assistant", "content": answer},
        ]
    }


async def run_level(
    graph: Any, sessions: int, path: str, latency_ms: float, duration: float
) -> dict[str, Any]:
    message, calls = PATHS[path]
    expect = EXPECT[path]
    request_s = calls * latency_ms / 1000
    errors: Counter[str] = Counter()
    start = time.monotonic_ns()
    warmup_s = warmup_seconds(sessions, request_s)
    window = Window(start + int(warmup_s * 1e9), start + int((warmup_s + duration) * 1e9))

    async def session() -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        await asyncio.sleep(random.uniform(0, request_s))
        while time.monotonic_ns() < window.end_ns:
            out = Outcome(sent_ns=time.monotonic_ns())
            try:
                state = await asyncio.wait_for(
                    graph.ainvoke({"message": unique(message)}, config), 120
                )
                out.text = str(state.get("output", ""))
                if expect not in out.text:
                    out.error = "unexpected_answer"
            except Exception as exc:
                out.error = type(exc).__name__
            out.end_ns = time.monotonic_ns()
            window.outcomes.append(out)
            if out.error:
                errors[out.error] += 1

    coros = [session() for _ in range(sessions)]
    unfinished = await run_until(window, coros, grace=max(10.0, 2 * request_s))
    return window_figures(window, sessions, calls, latency_ms, errors, unfinished)


async def run_levels(
    base_url: str, levels: list[int], path: str, latency_ms: float, duration: float
) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench-key", timeout=60, max_retries=3)
    sampler = RssSampler({"langgraph": os.getpid()}).start()
    out: dict[str, Any] = {"levels": {}}
    try:
        for n in levels:
            sampler.reset()
            # A fresh graph (and checkpointer) per level, as a fresh process would have.
            figures = await run_level(build_graph(client), n, path, latency_ms, duration)
            figures["peak_rss_mib"] = sampler.peaks()
            out["levels"][str(n)] = figures
    finally:
        sampler.stop()
        await client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.langgraph_baseline", description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--levels", required=True, help="concurrent sessions, e.g. 50,200,1000")
    parser.add_argument("--path", default="orchestrated_1", choices=sorted(PATHS))
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--duration", type=float, default=20.0)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    figures = asyncio.run(
        run_levels(args.base_url, levels, args.path, args.latency_ms, args.duration)
    )
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
