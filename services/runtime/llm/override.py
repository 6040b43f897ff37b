"""A model asked for by one request (a replay's `--model`): set around the work of that request
(`model_as`), used by every chat call made inside it in place of the role's configured model.
Embeddings keep theirs: another model's vectors would not compare with the stored ones."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_MODEL: ContextVar[str | None] = ContextVar("sidekick_model_override", default=None)


@contextmanager
def model_as(model: str | None) -> Iterator[None]:
    """Chat calls inside the block use `model` (None: the role's own)."""
    token = _MODEL.set(model)
    try:
        yield
    finally:
        _MODEL.reset(token)


def chosen(configured: str) -> str:
    """The model a chat call sends: the request's, when it asked for one, else `configured`."""
    return _MODEL.get() or configured
