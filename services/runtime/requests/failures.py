"""Turning runtime errors into the failure codes clients see."""

from __future__ import annotations

from contracts.base import FailureCode
from services.runtime.base.errors import LLMInvalidOutput, LLMNotConfigured


def failure_code(exc: BaseException) -> FailureCode:
    if isinstance(exc, LLMNotConfigured):
        return "llm_not_configured"
    if isinstance(exc, LLMInvalidOutput):
        return "llm_invalid_output"
    return "llm_unavailable"
