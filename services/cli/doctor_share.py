"""`sidekick doctor` writes what it learned about each model endpoint (its structured-output
mode, whether it reports usage) to the bus's `endpoints` bucket, so the services start knowing it
(services/runtime/hosting/endpoints.py). Best effort: without NATS, or without the right to
write there, a row says it was not shared."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from contracts import Subjects
from services.runtime.base.settings import STRUCTURED_MODES, Settings, StructuredMode
from services.runtime.hosting import endpoints
from services.runtime.llm.modes import MODES, Key

if TYPE_CHECKING:
    from services.cli.doctor_checks import Row
    from services.runtime.llm.probe import ModelReport


def learned(reports: list[ModelReport]) -> dict[Key, tuple[StructuredMode | None, bool | None]]:
    """Per (base URL, model): the mode doctor found (not a forced one) and the usage seen."""
    out: dict[Key, tuple[StructuredMode | None, bool | None]] = {}
    for report in reports:
        if report.role == "embeddings" or not report.base_url.startswith("http"):
            continue
        mode = next((m for m in STRUCTURED_MODES if report.mode == m), None)
        if mode is not None or report.usage_reported is not None:
            out[(report.base_url, report.model)] = (mode, report.usage_reported)
    return out


async def share(settings: Settings, reports: list[ModelReport], seconds: float) -> Row:
    import nats

    from services.cli.doctor_checks import Row, _tcp_reachable

    facts = learned(reports)
    if not facts:
        return Row("endpoints", None, "nothing learned to share (no model calls made)")
    if not await _tcp_reachable(settings.nats_url, seconds):
        return Row("endpoints", None, "not shared with the services: NATS is not running")
    try:
        async with asyncio.timeout(seconds):
            nc = await nats.connect(settings.nats_url, allow_reconnect=False, connect_timeout=2)
    except Exception as exc:
        return Row("endpoints", None, f"not shared with the services: no NATS ({exc!r})")
    try:
        async with asyncio.timeout(seconds):
            kv = await nc.jetstream().key_value(Subjects(settings.namespace).bucket("endpoints"))
            for key, (mode, usage) in facts.items():
                MODES.learn(key, mode, usage)
                await endpoints.write(kv, key, "doctor")
    except Exception as exc:
        return Row("endpoints", None, f"not shared with the services ({exc!r})")
    finally:
        await nc.close()
    return Row("endpoints", True, f"what was learned of {len(facts)} endpoint(s) is shared")
