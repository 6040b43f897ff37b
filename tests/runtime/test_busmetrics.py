"""Broker metrics are labelled by subject pattern, so per-request subjects cannot grow the
number of time series without bound."""

from __future__ import annotations

from contracts import Subjects
from services.runtime.bus.busmetrics import subject_pattern


def test_per_request_subjects_are_labelled_by_their_pattern() -> None:
    s = Subjects("sidekick")
    assert subject_pattern(s.stream("r-1")) == "sidekick.out.*.chunk"
    assert subject_pattern(s.request_completed("a.b.c")) == "sidekick.out.*.completed"
    assert subject_pattern(s.progress("r-2")) == subject_pattern(s.progress("r-3"))
    assert subject_pattern("sidekick.outbox.r-1") == "sidekick.outbox.*"


def test_work_subjects_keep_their_names() -> None:
    s = Subjects("sidekick")
    for subject in (s.chat_requested, s.worker_run("general"), s.evaluator_run):
        assert subject_pattern(subject) == subject
