"""A reply's text is stored coalesced: a chunk per sentence of at least STORE_MIN characters,
or per STORE_MAX, cut by the model's text alone; the tail is stored when the reply stops for
any reason but a direct answer's end, which carries the whole text. Live chunks go out as
before, and together they are the whole reply."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from contracts import StreamChunk, Subjects
from services.runtime.bus.core import Bus
from services.runtime.requests.streaming import STORE_MAX, STORE_MIN, ChunkStream


class Recorder:
    """What a ChunkStream needs of a bus: the subjects, and a publish it records."""

    def __init__(self) -> None:
        self.subjects = Subjects("t")
        self.sent: list[tuple[str, StreamChunk]] = []

    async def emit(self, event: BaseModel, subject: str) -> None:
        assert isinstance(event, StreamChunk)
        self.sent.append((subject, event))

    def on(self, what: str) -> list[str]:
        return [c.text for s, c in self.sent if s.endswith(f".{what}")]


def stream(deltas: list[str]) -> tuple[Recorder, ChunkStream]:
    bus = Recorder()
    chunks = ChunkStream(cast(Bus, cast(Any, bus)), "r1", "p/s1")
    for delta in deltas:
        chunks.add(delta)
    return bus, chunks


SENTENCE = "A sentence long enough to be worth a stored message of its very own, it ends here. "
DELTAS = [word + " " for word in (SENTENCE * 3).split()]


async def test_stored_text_is_cut_at_long_sentences_and_a_direct_answer_keeps_no_tail() -> None:
    assert len(SENTENCE) >= STORE_MIN
    bus, chunks = stream([*DELTAS, "And a short tail."])
    await chunks.close(end_has_text=True)
    live, kept = bus.on("chunk"), bus.on("text")
    assert "".join(live) == "".join(DELTAS) + "And a short tail."
    assert kept == [SENTENCE] * 3  # one per sentence; the tail is the end's
    assert all(s.startswith("t.out.") and ".r1." in s for s, _ in bus.sent)


async def test_a_reply_that_stops_otherwise_stores_its_tail() -> None:
    bus, chunks = stream(["Routed after a few words"])
    await chunks.close()
    assert bus.on("text") == ["Routed after a few words"]


async def test_text_without_a_sentence_end_is_stored_every_store_max_characters() -> None:
    words = ["word "] * (STORE_MAX // 5 * 2 + 3)
    bus, chunks = stream(words)
    await chunks.close()
    kept = bus.on("text")
    assert [len(k) for k in kept[:2]] == [STORE_MAX, STORE_MAX]
    assert "".join(kept) == "".join(words)
