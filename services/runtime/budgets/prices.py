"""What a model's tokens cost: money is a request's usage priced by `PRICES` (USD per million
tokens in and out), which `SIDEKICK_PRICES` overrides model by model."""

from __future__ import annotations

from contracts import Usage

# USD per million tokens (input, output): OpenAI's published list prices for these models as of
# 2025 (the price source); a model not listed costs nothing here until SIDEKICK_PRICES names it.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}
PRICE_SOURCE = "OpenAI list prices (2025), per million tokens; SIDEKICK_PRICES overrides"
Table = dict[str, tuple[float, float]]


def prices(overrides: str) -> Table:
    """The price table with `model=input:output` pairs (';'-separated) laid over it."""
    table = dict(PRICES)
    for part in filter(None, (p.strip() for p in overrides.split(";"))):
        model, _, pair = part.partition("=")
        given, _, taken = pair.partition(":")
        try:
            table[model.strip()] = (float(given), float(taken))
        except ValueError as exc:
            raise ValueError(f"SIDEKICK_PRICES: {part!r} is not 'model=input:output'") from exc
    return table


def cost(usage: Usage, table: Table) -> float:
    total = 0.0
    for model, used in usage.models.items():
        given, taken = table.get(model, (0.0, 0.0))
        total += (used.input_tokens * given + used.output_tokens * taken) / 1_000_000
    return round(total, 6)


def per_token(table: Table, model: str) -> float:
    """A bound on what one token of `model` costs: the dearer of its two prices."""
    return max(table.get(model, (0.0, 0.0))) / 1_000_000
