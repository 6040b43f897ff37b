"""The operator's approval policy: for each action a worker may take (`email.send`, `notify`,
an MCP tool `<server>__<tool>`, `browser.new_domain`, `python_run`), `allow`, `ask` or `deny`.

Rules come from `SIDEKICK_APPROVALS` ('action=decision' pairs, ';'-separated), then the JSON file
named by `SIDEKICK_APPROVAL_POLICY`, then the defaults; the first rule whose pattern (shell
wildcards) matches the action decides. A rule may be stricter for one fact of the arguments:
`unwritten_recipient` is the decision when an email goes to an address the user never wrote in
the conversation (by default `ask`, so an `allow` for email still asks for such a recipient).
"Wrote" means the whole address, as an address: the addresses in the user's words are found
with their boundaries (`boss@company.com` holds neither `boss@company.co` nor
`oss@company.com`, `j.smith@example.com` not `smith@example.com`), and compared whole, trimmed
and case-insensitively (`written_addresses`). Which words are the user's is the caller's to
say: the email worker gives only what the user wrote (services/workers/email.py).
A rule may also say who decides (`approver`): `principal` (the default: the request's own
principal, or any operator named in SIDEKICK_APPROVERS) or `operator` (only those operators).
A file that cannot be read or parsed, or a rule for operators when none is named, stops the
worker at start, with the reason: no silent fallback to a looser policy.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import get_args

from contracts.approvals import Approver, PolicyDecision
from services.runtime.base.errors import ConfigurationError

DECISIONS: tuple[PolicyDecision, ...] = get_args(PolicyDecision)
STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
APPROVERS: tuple[Approver, ...] = get_args(Approver)
FACTS = ("", "unwritten_recipient", "approver")

# An address in running text, whole: it starts where no character of an address's local part
# is before it and ends where its domain cannot go on (a label character, or a dot and one).
# Letters of any script count: an address with a look-alike letter of another script is one
# whole (unequal) address, never the part after that letter.
_ATOM = r"\w.!#$%&'*+/=?^`{|}~-"
_WRITTEN = re.compile(rf"(?<![{_ATOM}])[{_ATOM}]+@[\w-]+(?:\.[\w-]+)+(?![\w-]|\.[\w-])")


def normal_address(address: str) -> str:
    """An address as compared: trimmed, without a trailing dot, case-insensitive (the domain
    always is; the local part is for nearly every mail system, and "ADA@" written for "ada@"
    is the same person)."""
    return address.strip().rstrip(".").casefold()


def written_addresses(text: str) -> set[str]:
    """The whole addresses written in `text`, normalised."""
    return {normal_address(found) for found in _WRITTEN.findall(text)}


class PolicyError(ConfigurationError, ValueError):
    """The policy's configuration is not usable; the message says where and why."""


@dataclass(frozen=True)
class Rule:
    action: str
    decision: PolicyDecision
    unwritten_recipient: PolicyDecision = "ask"
    source: str = "default"
    approver: Approver = "principal"


DEFAULTS = (
    Rule("email.send", "ask"),
    Rule("notify", "ask"),
    Rule("python_run", "allow"),
    Rule("browser.new_domain", "allow"),
    Rule("*", "allow"),
)


@dataclass(frozen=True)
class Ruling:
    decision: PolicyDecision
    reason: str
    approver: Approver = "principal"


def _decision(value: object, where: str) -> PolicyDecision:
    if value not in DECISIONS:
        raise PolicyError(f"{where}: {value!r} is not one of {', '.join(DECISIONS)}")
    return value


def _approver(value: object, where: str) -> Approver:
    if value not in APPROVERS:
        raise PolicyError(f"{where}: approver {value!r} is not one of {', '.join(APPROVERS)}")
    return value


def parse_pairs(text: str) -> list[Rule]:
    """'action=decision' pairs; 'action:unwritten_recipient=decision' sets that fact's
    decision on the action's rule, 'action:approver=operator' who decides it."""
    rules: dict[str, Rule] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        action, _, fact = key.strip().partition(":")
        if not sep or not action or fact not in FACTS:
            raise PolicyError(
                f"SIDEKICK_APPROVALS: {part!r} is not 'action=decision' (or "
                "'action:unwritten_recipient=decision', 'action:approver=principal|operator')"
            )
        where = f"SIDEKICK_APPROVALS ({key.strip()})"
        rule = rules.get(action, Rule(action, "ask", source="variable"))
        if fact == "approver":
            rules[action] = replace(rule, approver=_approver(value.strip(), where))
            continue
        decision = _decision(value.strip(), where)
        if fact:
            rules[action] = replace(rule, unwritten_recipient=decision)
        else:
            rules[action] = replace(rule, decision=decision)
    return list(rules.values())


def parse_file(path: str) -> list[Rule]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PolicyError(f"SIDEKICK_APPROVAL_POLICY {path}: {exc}") from exc
    items = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise PolicyError(f'SIDEKICK_APPROVAL_POLICY {path}: expected {{"rules": [...]}}')
    rules = []
    for n, item in enumerate(items, 1):
        where = f"SIDEKICK_APPROVAL_POLICY {path}, rule {n}"
        if not isinstance(item, dict) or not isinstance(item.get("action"), str):
            raise PolicyError(f"{where}: each rule needs an 'action'")
        unknown = set(item) - {"action", "decision", "unwritten_recipient", "approver"}
        if unknown:
            raise PolicyError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        rules.append(
            Rule(
                item["action"],
                _decision(item.get("decision"), where),
                _decision(item.get("unwritten_recipient", "ask"), where),
                source="file",
                approver=_approver(item.get("approver", "principal"), where),
            )
        )
    return rules


class Policy:
    def __init__(self, rules: list[Rule]) -> None:
        self.rules = [*rules, *DEFAULTS]

    @classmethod
    def configured(cls, pairs: str, path: str | None, operators: tuple[str, ...] = ()) -> Policy:
        rules = parse_pairs(pairs) + (parse_file(path) if path else [])
        if not operators:
            for rule in rules:
                if rule.approver == "operator":
                    raise PolicyError(
                        f"the {rule.source} approval rule for {rule.action} is decided by an "
                        "operator, but SIDEKICK_APPROVERS names none"
                    )
        return cls(rules)

    def rule_for(self, action: str) -> Rule:
        return next(r for r in self.rules if fnmatch.fnmatchcase(action, r.action))

    def ruling(self, action: str) -> Ruling:
        """The ruling on `action` from its first matching rule (facts of the arguments aside:
        `email` adds those for email.send)."""
        rule = self.rule_for(action)
        pattern = "" if rule.action == action else f" (rule {rule.action!r})"
        return Ruling(
            rule.decision,
            f"the {rule.source} approval policy says {rule.decision} for {action}{pattern}",
            rule.approver,
        )

    def email(self, recipients: list[str], written: str) -> Ruling:
        """The ruling on sending to `recipients`, given what the user wrote (`written`: the
        user's own words only). A recipient counts as written when the user wrote that
        whole address."""
        rule = self.rule_for("email.send")
        said = written_addresses(written)
        unwritten = [r for r in recipients if normal_address(r) not in said]
        if unwritten and STRICTNESS[rule.unwritten_recipient] > STRICTNESS[rule.decision]:
            return Ruling(
                rule.unwritten_recipient,
                f"you did not write {', '.join(unwritten)} in this conversation",
                rule.approver,
            )
        return Ruling(
            rule.decision,
            f"the {rule.source} approval policy says {rule.decision} for email.send",
            rule.approver,
        )
