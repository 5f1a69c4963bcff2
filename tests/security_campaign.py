"""The security campaign's record (issue 14): every case a campaign tries, with what it came to, summed up in one
table at the end of the test session (`tests/conftest.py` prints it). The table is the report; each campaign test
still fails on its own when one of its cases is in FAILURES."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

REJECTED = "rejected"
"""Refused with a reason (an attack stopped, a fault answered loudly); the reason is required."""
ACCEPTED = "accepted"
"""Accepted, as expected (a legitimate submission, a job that finished intact)."""
ACCEPTED_WRONGLY = "accepted wrongly"
"""Accepted although it should have been refused (or stored twice)."""
REJECTED_WRONGLY = "rejected wrongly"
"""Refused although it should have been accepted."""
CRASHED = "crashed"
"""An exception or a hang instead of an answer."""
ESCAPED = "escaped"
"""An attack got out of its containment (or a hostile string back out as markup or a server path)."""
LOST = "lost"
"""Work that silently went missing (a write into a removed file, a job or task that never finished)."""

OUTCOMES = (REJECTED, ACCEPTED, ACCEPTED_WRONGLY, REJECTED_WRONGLY, CRASHED, ESCAPED, LOST)
FAILURES = frozenset(OUTCOMES[2:])
COLUMNS = {
    "tried": None,
    "rejected with reason": REJECTED,
    "accepted (expected)": ACCEPTED,
    "accepted wrongly": ACCEPTED_WRONGLY,
    "rejected wrongly": REJECTED_WRONGLY,
    "crashed": CRASHED,
    "escaped": ESCAPED,
    "lost": LOST,
}
"""The table's columns and the outcome each counts (None: every case)."""


@dataclass(frozen=True)
class Case:
    """One case of a campaign and what it came to."""

    campaign: str
    case: str
    outcome: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.campaign} · {self.case}: {self.outcome}" + (f" ({self.reason})" if self.reason else "")


class CampaignRecorder:
    """The cases of every campaign in one test session, in the order they were recorded; `for_test` gives a
    recorder of one test's cases that records them in the session's too."""

    def __init__(self, session: CampaignRecorder | None = None) -> None:
        self.cases: list[Case] = []
        self._session = session

    def for_test(self) -> CampaignRecorder:
        return CampaignRecorder(self)

    def record(self, campaign: str, case: str, outcome: str, reason: str = "") -> None:
        """Record what `case` of `campaign` came to: one of OUTCOMES, with the reason (required for REJECTED)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}; one of {', '.join(OUTCOMES)}")
        if outcome == REJECTED and not reason.strip():
            raise ValueError(f"{campaign} · {case}: a rejection must say why")
        recorded = Case(campaign, case, outcome, reason)
        self.cases.append(recorded)
        if self._session is not None:
            self._session.cases.append(recorded)

    def failures(self) -> list[Case]:
        """The cases recorded here whose outcome is in FAILURES."""
        return [c for c in self.cases if c.outcome in FAILURES]

    def table(self) -> list[str]:
        """One line per campaign, in the order each was first recorded, and a total line: the cases tried and how
        many came to each outcome."""
        campaigns = list(dict.fromkeys(c.campaign for c in self.cases))
        rows = [(name, self._counts(name)) for name in campaigns] + [("total", self._counts(None))]
        width = max(len(name) for name in ("campaign", *campaigns))
        header = f"{'campaign':<{width}}" + "".join(f" | {column}" for column in COLUMNS)
        lines = [header, "-" * len(header)]
        for name, counts in rows:
            lines.append(f"{name:<{width}}" + "".join(f" | {counts[c]:>{len(c)}}" for c in COLUMNS))
        return lines

    def _counts(self, campaign: str | None) -> dict[str, int]:
        outcomes = Counter(c.outcome for c in self.cases if campaign in (None, c.campaign))
        return {column: outcomes[o] if o else outcomes.total() for column, o in COLUMNS.items()}
