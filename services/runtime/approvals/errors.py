"""What approvals refuse, and why; each refusal leaves everything as it was. All are
`SidekickError`s (the whole tree: services/runtime/base/errors.py).

ApprovalRefused            the store wrote no decision (records.py); `.current` is the approval
├── ApprovalClosed         it was already decided (or expired); `.current` says how
│   └── ApprovalExpired    its time ran out before the decision was stored: `.current` is it,
│                          expired (the expiry written now, if no one had yet)
└── NotAnApprover          the deciding principal is not among its approvers
DecisionRefused            a person's decision was not taken (deciding.py), said for them
├── NotDecidable           no approval waits, another one does, it is not theirs to decide,
│   │                      it was decided already, or the request moved on
│   └── DecisionExpired    the approval expired first: the request goes on as declined
│                          (`.record`, its record as it moved on)
├── UnclearAnswer          the words say neither yes nor no
└── DecisionUnavailable    the store or the bus did not answer; a retry may
"""

from __future__ import annotations

from contracts import RequestRecord
from contracts.approvals import Approval
from services.runtime.base.errors import SidekickError


class ApprovalRefused(SidekickError):
    def __init__(self, approval: Approval, message: str) -> None:
        self.current = approval
        super().__init__(message)


class ApprovalClosed(ApprovalRefused):
    pass


class ApprovalExpired(ApprovalClosed):
    pass


class NotAnApprover(ApprovalRefused):
    pass


class DecisionRefused(SidekickError):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class NotDecidable(DecisionRefused):
    pass


class DecisionExpired(NotDecidable):
    def __init__(self, message: str, record: RequestRecord) -> None:
        self.record = record
        super().__init__(message)


class UnclearAnswer(DecisionRefused):
    pass


class DecisionUnavailable(DecisionRefused):
    pass
