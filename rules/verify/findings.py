"""What a verification found, as plain data: a ``Finding`` names the check, the prim and the problem; a
``CheckResult`` is one check's outcome (``passed``, ``failed`` or ``skipped``) with its findings."""

from __future__ import annotations

from typing import Any

import attrs

#: The outcomes a check can have; ``failed`` means at least one finding of severity ``error``, ``limited``
#: none but at least one ``limitation`` (the engine could not show what it was asked to: not a pass).
STATUSES = ("passed", "failed", "skipped", "limited")


@attrs.frozen
class Finding:
    """One problem. check: the check's name (e.g. ``joint-limits``); prim: the USD prim path it is about
    (the asset's root prim when it is about the whole asset); severity: ``error``, ``warning`` or
    ``limitation`` (a known limitation of a third-party engine, named with its version: neither hidden nor
    a pass); log: the engine's whole output where an engine failed (``rules.verify.logs``: paths relative),
    else empty."""

    check: str
    prim: str
    message: str
    severity: str = "error"
    log: str = ""

    def line(self, asset: str) -> str:
        """The one-line form ``doit verify`` prints: asset, prim, check, message."""
        return f"{asset}: {self.prim}: {self.check}: {self.message}"


@attrs.define
class CheckResult:
    """The outcome of one check. name: e.g. ``usd-validation``; detail: a short summary for people
    (figures measured, or why it was skipped); seconds: wall time the check took."""

    name: str
    status: str = "passed"
    detail: str = ""
    findings: list[Finding] = attrs.field(factory=list)
    seconds: float = 0.0

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)
        if finding.severity == "error":
            self.status = "failed"
        elif finding.severity == "limitation" and self.status == "passed":
            self.status = "limited"

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def limitations(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "limitation"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "seconds": round(self.seconds, 3),
                "findings": [attrs.asdict(f) for f in self.findings]}


def skipped(name: str, reason: str) -> CheckResult:
    """A check that could not run here, with the reason (e.g. ``skipped: install usdforge[sim]``)."""
    return CheckResult(name, "skipped", reason)
