"""JSON from strangers, bounded in nesting before it is parsed: `json.loads` recurses once per
level, so 32,000 nested arrays end in a RecursionError (not a ValueError) that escapes every
handler written for bad JSON. `loads` counts the levels first, outside strings, with C-speed
steps (a regex for the strings, `bytes.translate` for the brackets), and refuses deeper input
with `TooDeep`, a ValueError that says so."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from services.runtime.base.errors import SidekickError

MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class TooDeep(SidekickError, ValueError):
    """The document nests arrays and objects deeper than allowed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def depth(data: bytes) -> int:
    """How deep `data` nests arrays and objects (exact for valid JSON)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing input nested deeper than `max_depth` with `TooDeep`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if depth(raw) > max_depth:
        raise TooDeep(max_depth)
    try:
        return json.loads(data)
    except RecursionError as exc:  # not reachable past the count; said the same way if it is
        raise TooDeep(max_depth) from exc
