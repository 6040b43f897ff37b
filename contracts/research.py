"""Structured outputs of the RESEARCH worker's model steps (the workflow seed's planner and
synthesizer). The researcher and the validator are code, not models, so they have none."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.base import Model
from contracts.decisions import Question


class ResearchPlan(Model):
    """The planner's plan for one research task. Pure model: it fetches nothing."""

    goal: str = Field(description="What the research must establish, in one sentence.")
    steps: list[str] = Field(description="The steps to get there, in order.")
    search_queries: list[str] = Field(
        description="Web search queries to run (1 to 4), each self-contained."
    )
    requirements: list[str] = Field(
        description="What the final answer must contain to be complete."
    )
    freshness_required: bool = Field(
        description="True when the answer depends on news, current data or prices."
    )
    clarification_needed: bool = Field(
        description="True only when the request is too ambiguous to research without asking."
    )
    questions: list[Question] = Field(
        description="Questions for the user when clarification is needed; otherwise empty."
    )


Confidence = Literal["low", "medium", "high"]


class ResearchSynthesis(Model):
    """The synthesizer's answer, written only from the researched sources."""

    answer_markdown: str = Field(
        description="The answer in markdown, citing sources inline as [n]; no source list."
    )
    confidence: Confidence = Field(description="How well the sources support the answer.")
    citations: list[int] = Field(
        description="Numbers [n] of the sources the answer relies on, most important first."
    )
