"""Errors of the shared runtime.

SidekickError
 +-- ConfigurationError          a setting is missing or wrong; names the variables to set
 |    +-- LLMNotConfigured
 +-- LLMError                    a model call failed after its retries (and its fallback's)
 |    +-- LLMUnavailable         network error, timeout, 429 or 5xx persisted; or a 4xx
 |    +-- LLMInvalidOutput       the reply failed validation twice (names role, model, mode)
 +-- PoisonMessage               a bus message that can never be processed (bad JSON/schema)
"""

from __future__ import annotations


class SidekickError(Exception):
    """Base of every error Sidekick raises on purpose."""


class ConfigurationError(SidekickError):
    pass


class LLMNotConfigured(ConfigurationError):
    def __init__(self, role: str) -> None:
        self.role = role
        super().__init__(
            f"No language model is configured for the {role}. Set SIDEKICK_LLM_BASE_URL "
            f"(or OPENAI_BASE_URL) and SIDEKICK_LLM_API_KEY (or OPENAI_API_KEY), optionally "
            f"SIDEKICK_LLM_MODEL, or the per-role SIDEKICK_{role.upper()}_LLM_* variables."
        )


class LLMError(SidekickError):
    def __init__(self, role: str, model: str, message: str) -> None:
        self.role = role
        self.model = model
        super().__init__(message)


class LLMUnavailable(LLMError):
    def __init__(
        self,
        role: str,
        model: str,
        message: str,
        *,
        transient: bool = True,
        status: int | None = None,
    ) -> None:
        # transient: the endpoint failed (5xx, 429, timeout, refused), so a fallback may help;
        # otherwise it answered "no" (4xx), which another try of the same request would repeat.
        self.transient = transient
        self.status = status  # the HTTP status, when the server answered
        super().__init__(role, model, message)


class LLMInvalidOutput(LLMError):
    def __init__(self, role: str, model: str, message: str, raw: str, mode: str = "") -> None:
        self.raw = raw
        self.mode = mode
        super().__init__(role, model, message)


class PoisonMessage(SidekickError):
    def __init__(self, subject: str, reason: str) -> None:
        self.subject = subject
        self.reason = reason
        super().__init__(f"poison message on {subject}: {reason}")


# Every error a model call can end in, for `except MODEL_ERRORS`.
MODEL_ERRORS: tuple[type[SidekickError], ...] = (LLMError, LLMNotConfigured)
