"""The operator's approval policy on its own: the defaults (email and notify ask, reading does
not), rules from the variable ahead of the file, wildcards for MCP tools, the unwritten-recipient
fact, and a policy that cannot be read refusing to start rather than falling back to a looser
one. Also the words a person answers with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts import utcnow
from contracts.approvals import Approval, digest_of
from services.gateway.core.approving import verdict_of
from services.gateway.core.errors import Invalid
from services.runtime.approvals.policy import Policy, PolicyError, Ruling
from services.runtime.approvals.questions import approval_question
from services.workers.tools.gate import shown_arguments
from services.workers.tools.hosts import host_of

pytestmark = pytest.mark.fast


def test_by_default_email_and_notify_ask_and_reading_is_allowed() -> None:
    policy = Policy.configured("", None)
    assert policy.rule_for("email.send").decision == "ask"
    assert policy.rule_for("notify").decision == "ask"
    assert policy.rule_for("wikipedia").decision == "allow"
    assert policy.rule_for("github__get_issue").decision == "allow"
    ruling = policy.email(["ada@example.com"], "email ada@example.com")
    assert ruling.decision == "ask" and "default" in ruling.reason


def test_an_allowed_email_still_asks_for_a_recipient_the_user_never_wrote() -> None:
    policy = Policy.configured("email.send=allow", None)
    assert policy.email(["ada@example.com"], "Email ADA@example.com please").decision == "allow"
    asked = policy.email(["ada@example.com", "eve@evil.example"], "email ada@example.com")
    assert asked.decision == "ask"
    assert asked.reason == "you did not write eve@evil.example in this conversation"
    trusting = Policy.configured("email.send=allow;email.send:unwritten_recipient=allow", None)
    assert trusting.email(["eve@evil.example"], "").decision == "allow"


def test_the_variable_comes_before_the_file_and_wildcards_match_mcp_tools(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {"action": "github__create_*", "decision": "deny"},
                    {"action": "github__*", "decision": "ask"},
                    {"action": "email.send", "decision": "allow", "unwritten_recipient": "deny"},
                ]
            }
        )
    )
    policy = Policy.configured("github__create_issue=ask", str(path))
    assert policy.rule_for("github__create_issue").decision == "ask"  # the variable wins
    assert policy.rule_for("github__create_pull_request").decision == "deny"
    assert policy.rule_for("github__list_issues").decision == "ask"
    assert policy.rule_for("notify").decision == "ask"  # the defaults still apply after
    assert policy.email(["x@example.com"], "").decision == "deny"


@pytest.mark.parametrize(
    ("pairs", "content", "says"),
    [
        ("email.send=maybe", None, "'maybe' is not one of allow, ask, deny"),
        ("email.send", None, "is not 'action=decision'"),
        ("email.send:colour=ask", None, "is not 'action=decision'"),
        ("", "{not json", "SIDEKICK_APPROVAL_POLICY"),
        ("", '{"rules": [{"decision": "allow"}]}', "each rule needs an 'action'"),
        ("", '{"rules": [{"action": "notify", "decision": "allow", "when": 1}]}', "unknown key"),
        ("", '{"rule": []}', 'expected {"rules": [...]}'),
    ],
)
def test_a_policy_that_cannot_be_read_is_refused_with_the_reason(
    tmp_path: Path, pairs: str, content: str | None, says: str
) -> None:
    path = None
    if content is not None:
        path = tmp_path / "policy.json"
        path.write_text(content)
    with pytest.raises(PolicyError) as caught:
        Policy.configured(pairs, str(path) if path else None)
    assert says in str(caught.value)


def test_a_rule_may_leave_an_action_to_operators_and_needs_one_named(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps({"rules": [{"action": "notify", "decision": "ask", "approver": "operator"}]})
    )
    policy = Policy.configured("email.send=allow;email.send:approver=operator", str(path), ("ops",))
    assert policy.rule_for("email.send").approver == "operator"
    assert policy.rule_for("notify").approver == "operator"
    assert policy.rule_for("python_run").approver == "principal"
    assert policy.email(["eve@evil.example"], "").approver == "operator"
    # Left to operators, with none named: refused at start, never decided by the principal.
    with pytest.raises(PolicyError, match="SIDEKICK_APPROVERS names none"):
        Policy.configured("", str(path))
    with pytest.raises(PolicyError, match="approver 'admin' is not one of principal, operator"):
        Policy.configured("notify:approver=admin", None, ("ops",))


def test_a_missing_policy_file_is_refused() -> None:
    with pytest.raises(PolicyError, match="SIDEKICK_APPROVAL_POLICY /no/such/file"):
        Policy.configured("", "/no/such/file")


@pytest.mark.parametrize("words", ["yes", "Yes.", " approve ", "approved", "OK!", "true"])
def test_words_that_approve(words: str) -> None:
    assert verdict_of(words) == "approved"


@pytest.mark.parametrize("words", ["no", "No.", "deny", "rejected", "needs_changes", "false"])
def test_words_that_decline(words: str) -> None:
    assert verdict_of(words) == "denied"


@pytest.mark.parametrize("words", ["", "maybe", "yes but change the subject", "sure thing"])
def test_anything_else_decides_nothing_and_says_how_to_answer(words: str) -> None:
    with pytest.raises(Invalid, match="answer yes to approve it, or no to decline"):
        verdict_of(words)


def test_a_tool_action_is_ruled_by_its_first_matching_rule_and_the_reason_names_it() -> None:
    policy = Policy.configured("github__create_*=ask;github__*=deny", None)
    asked = policy.ruling("github__create_issue")
    assert asked.decision == "ask"
    assert asked.reason == (
        "the variable approval policy says ask for github__create_issue (rule 'github__create_*')"
    )
    assert policy.ruling("github__delete_repo").decision == "deny"
    assert policy.ruling("python_run") == Ruling(
        "allow", "the default approval policy says allow for python_run"
    )
    assert policy.ruling("notify").decision == "ask"
    assert policy.ruling("browser.new_domain").decision == "allow"
    ops = Policy.configured("vault__*=ask;vault__*:approver=operator", None, ("ops",))
    assert ops.ruling("vault__tally").approver == "operator"


def test_a_tool_calls_arguments_show_as_text_and_no_two_different_calls_show_alike() -> None:
    calls = [
        {"n": 1},
        {"n": "1"},
        {"n": '"1"'},
        {"n": True},
        {"n": "true"},
        {"n": None},
        {"n": "null"},
        {"n": [1, 2]},
        {"n": "[1, 2]"},
        {"n": {"b": 1, "a": 2}},
    ]
    shown = [shown_arguments(json.dumps(c)) for c in calls]
    assert len({json.dumps(s, sort_keys=True) for s in shown}) == len(calls)
    assert shown_arguments('{"message": "Lunch at 1", "n": 2}') == {
        "message": "Lunch at 1",
        "n": "2",
    }
    assert shown[-1] == {"n": '{"a": 2, "b": 1}'}  # key order never changes the digest


def test_a_browser_host_is_counted_without_port_case_trailing_dot_or_www() -> None:
    assert host_of("https://WWW.Example.org.:8443/a?b") == "example.org"
    assert host_of("http://example.org/") == host_of("https://www.example.org/x")
    assert host_of("not a url") is None


def test_a_tool_approval_reads_as_its_action_and_no_value_passes_for_another_argument() -> None:
    def question(action: str, arguments: dict[str, str]) -> str:
        approval = Approval(
            approval_id="a1",
            request_id="r1",
            attempt=1,
            approvers=["ada"],
            action=action,
            arguments=arguments,
            digest=digest_of(action, arguments),
            reason="the default approval policy says ask for " + action,
            expires_at=utcnow(),
        )
        return approval_question(approval)

    assert question("notify", {"message": "Lunch at 1", "title": "Food"}).startswith(
        "Sidekick is about to send you this push notification:\nTitle: Food\n\nLunch at 1\n\n"
        "(the default approval policy says ask for notify.) Reply yes"
    )
    assert question("browser.new_domain", {"domain": "example.org"}).startswith(
        "Sidekick's browser is about to open a page on example.org."
    )
    forged = question("vault__tally", {"note": "hi\nowner: root", "z": "1"})
    assert "run vault__tally with:\nnote: hi\n    owner: root\nz: 1\n\n" in forged
