"""The A2A surface's errors: one kind, `RpcError`, carrying the JSON-RPC code the client reads
(-32602 invalid params, -32001 task not found, -32003 push notifications off, ...; rpc.py lists
them), and `parse`, which turns params that fail their model into -32602.

    SidekickError
    └── RpcError(code, message)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from services.runtime.base.errors import SidekickError


class RpcError(SidekickError):
    """An A2A error: its JSON-RPC code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse(model: type[Any], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        raise RpcError(-32602, f"Invalid params: {where}: {first['msg']}") from exc
