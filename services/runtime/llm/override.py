"""A model asked for by one request (a replay's `--model`): set around the work of that request
(`model_as`), used by every chat call made inside it in place of the role's configured model.
Embeddings keep theirs: another model's vectors would not compare with the stored ones."""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar

from services.runtime.base.logs import bound

_MODEL: ContextVar[str | None] = ContextVar("sidekick_model_override", default=None)


def model_as(model: str | None) -> AbstractContextManager[None]:
    """Chat calls inside the block use `model` (None: the role's own)."""
    return bound(_MODEL, model)


def chosen(configured: str) -> str:
    """The model a chat call sends: the request's, when it asked for one, else `configured`."""
    return _MODEL.get() or configured
