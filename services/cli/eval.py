"""`sidekick eval`: runs the eval cases against a system (--url, or one it starts), each case
with the evaluator loop and single-shot, and prints and writes the figures (services/evals)."""

from __future__ import annotations

import argparse
import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.evals.cases import DATASET, KINDS

if TYPE_CHECKING:  # the rest is imported when the command runs: `sidekick --help` stays quick
    from rich.console import Console

    from services.evals.judge import Judge
    from services.evals.runner import CaseRun, Mode, Target


# What `--local-model` runs by default: the kinds a 135M model on 2 cores gets through in
# minutes (direct answers, refusals, clarifications); search and research cases take several
# model calls each (add them with --kinds).
LOCAL_SUBSET = ("direct", "refusal", "clarification")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running gateway's WebSocket, e.g. ws://host/ws")
    p.add_argument("--token", default=None, help="bearer token (default $SIDEKICK_TOKEN)")
    p.add_argument("--cases", type=Path, default=DATASET, help="JSONL cases (default: built in)")
    p.add_argument(
        "--from-requests",
        nargs="+",
        default=None,
        metavar="ID",
        help="run these recorded requests (their message and criteria) as the cases; needs --url",
    )
    p.add_argument(
        "--failed-since",
        default=None,
        metavar="AGE",
        help="run the caller's requests that failed (or ended partial) within AGE, e.g. 1d, "
        "12h, as the cases; needs --url",
    )
    p.add_argument(
        "--save-cases",
        type=Path,
        default=None,
        help="with --from-requests/--failed-since: append the cases made to this JSONL file",
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N cases")
    p.add_argument("--kinds", default=None, help=f"only these kinds ({','.join(KINDS)})")
    p.add_argument("--concurrency", type=int, default=4, help="cases at once (default 4)")
    p.add_argument("--modes", default="loop,single", help="loop,single (default both)")
    p.add_argument("--judge", action="store_true", help="LLM judge for cases with a rubric")
    p.add_argument("--model", default=None, help="model to price tokens at (default: worker's)")
    p.add_argument(
        "--prices",
        type=Path,
        default=None,
        help="JSON price table to add/override; every case is then priced by it, not at the "
        "system's own cost",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per case (default 300)")
    p.add_argument("--json", type=Path, default=None, help="where to write the results")
    p.add_argument("--compare", type=Path, default=None, help="an earlier --json file")
    p.add_argument(
        "--local-model",
        action="store_true",
        help="its own system on the tiny local model (sidekick up --local-model); "
        "with no --kinds/--limit, only the LOCAL_SUBSET kinds",
    )


def priced_model(given: str | None) -> str:
    env = os.environ
    return (
        given
        or env.get("SIDEKICK_WORKER_LLM_MODEL")
        or env.get("SIDEKICK_LLM_MODEL")
        or "gpt-4o-mini"
    )


def run_eval(args: argparse.Namespace) -> int:
    from rich.console import Console

    from services.evals.cases import CasesError, load_cases
    from services.evals.judge import Judge, judge_config
    from services.evals.report import PricesError, load_prices, load_report, print_report, report
    from services.evals.runner import Target, http_url_of

    console = Console()
    err = Console(stderr=True)
    try:
        if args.from_requests or args.failed_since:
            from services.cli.inspecting import Gateway, GatewayRefused, seconds_of
            from services.evals.recorded import cases_from_requests, save_cases

            if not args.url:
                raise CasesError("recorded requests are read from a gateway: give --url")
            gateway = Gateway(args.url, args.token)
            try:
                ids = list(args.from_requests or [])
                if args.failed_since:
                    ids += gateway.failed(seconds_of(args.failed_since))
                if not ids:
                    raise CasesError(f"no request failed within {args.failed_since}")
                cases = cases_from_requests(gateway.timeline, ids)
            except GatewayRefused as exc:
                raise CasesError(str(exc)) from exc
            finally:
                gateway.close()
            if args.save_cases is not None:
                save_cases(args.save_cases, cases)
        else:
            cases = load_cases(args.cases)
        prices = load_prices(args.prices)
        old = load_report(args.compare) if args.compare else None
        modes = parse_modes(args.modes)
        judge = Judge(judge_config()) if args.judge else None
    except (CasesError, PricesError, ValueError) as exc:
        err.print(f"sidekick eval: {exc}", markup=False, highlight=False)
        return 1
    if args.kinds:
        wanted = {k.strip() for k in args.kinds.split(",")}
        cases = [c for c in cases if c.kind in wanted]
    if args.local_model and args.kinds is None and args.limit is None:
        cases = [c for c in cases if c.kind in LOCAL_SUBSET]
    if args.limit is not None:
        cases = cases[: max(args.limit, 0)]
    if not cases or args.concurrency < 1:
        err.print("sidekick eval: no cases to run (check --cases, --kinds, --limit, --concurrency)")
        return 1
    model = priced_model(args.model)
    token = args.token or os.environ.get("SIDEKICK_TOKEN")
    started = datetime.now(UTC)
    if args.url:
        ws_url = args.url if args.url.startswith("ws") else args.url.rstrip("/") + "/ws"
        ws_url = ws_url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        runs = run_all(
            Target(ws_url, http_url_of(ws_url), token, args.timeout),
            cases,
            modes,
            args.concurrency,
            judge,
            err,
        )
    else:
        from services.evals.system import OwnSystem
        from services.runtime.base.settings import Settings

        if not args.local_model and not Settings().llm("worker").configured:
            err.print(
                "sidekick eval: no model is configured (SIDEKICK_LLM_BASE_URL / "
                "SIDEKICK_LLM_API_KEY or OPENAI_API_KEY): every case will fail"
            )
        err.print("starting a system of its own (`sidekick up` on a free port)…")
        try:
            with OwnSystem(local_model=args.local_model) as own:
                err.print(f"  ready on {own.ws_url} (log: {own.log})")
                target = Target(own.ws_url, http_url_of(own.ws_url), None, args.timeout)
                runs = run_all(target, cases, modes, args.concurrency, judge, err)
        except RuntimeError as exc:
            err.print(f"sidekick eval: {exc}", markup=False, highlight=False)
            return 1
        ws_url = "(its own system)"
    meta: dict[str, Any] = {
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "url": ws_url,
        "cases_file": str(args.cases),
        "judge_model": judge.model if judge else None,
    }
    data = report(runs, model=model, prices=prices, meta=meta, reprice=args.prices is not None)
    print_report(console, data, old)
    out = args.json or Path(f"sidekick-eval-{started.strftime('%Y%m%d-%H%M%S')}.json")
    out.write_text(_json(data), encoding="utf-8")
    err.print(f"results written to {out} (compare a later run with --compare {out})")
    return 0


def parse_modes(text: str) -> list[Mode]:
    from services.evals.runner import MODES

    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"--modes takes loop and/or single, not {','.join(unknown) or 'nothing'}")
    return [m for m in MODES if m in modes]


def run_all(
    target: Target,
    cases: list[Any],
    modes: list[Mode],
    concurrency: int,
    judge: Judge | None,
    err: Console,
) -> list[CaseRun]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        bar = progress.add_task("running cases", total=len(cases) * len(modes))
        passed = 0

        def done(run: CaseRun) -> None:
            nonlocal passed
            passed += run.passed
            progress.update(bar, advance=1, description=f"running cases ({passed} passed)")

        return asyncio.run(evaluate(target, cases, modes, concurrency, judge, done))


async def evaluate(
    target: Target,
    cases: list[Any],
    modes: list[Mode],
    concurrency: int,
    judge: Judge | None,
    done: Any,
) -> list[CaseRun]:
    from services.evals.runner import run_case

    gate = asyncio.Semaphore(concurrency)

    async def one(case: Any, mode: Mode) -> CaseRun:
        async with gate:
            run = await run_case(target, case, mode)
            if judge is not None and case.judge and run.outcome.text:
                run.judge = await judge.grade(case, run.outcome.text)
        done(run)
        return run

    return list(await asyncio.gather(*(one(c, m) for c in cases for m in modes)))


def _json(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
