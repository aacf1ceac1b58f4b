"""Compare the state DB with the vector store (pure): what `ragsync verify` reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class VerifyReport:
    """Drift between the state DB (the truth) and the vector store (its projection)."""

    points_expected: int = 0
    points_in_store: int = 0
    missing: list[str] = field(default_factory=list)  # known chunks without a point
    orphans: list[str] = field(default_factory=list)  # points no chunk explains
    drift: list[str] = field(default_factory=list)  # points whose payload differs
    pending_journal: int = 0  # operations a crashed run left unapplied
    repaired: bool = False

    @property
    def clean(self) -> bool:
        return not (self.missing or self.orphans or self.drift or self.pending_journal)

    def to_dict(self) -> dict:
        return {
            "clean": self.clean,
            "repaired": self.repaired,
            "points_expected": self.points_expected,
            "points_in_store": self.points_in_store,
            "missing": self.missing,
            "orphans": self.orphans,
            "drift": self.drift,
            "pending_journal": self.pending_journal,
        }


def compare(expected: Mapping[str, dict], actual: Mapping[str, dict]) -> VerifyReport:
    """The drift between ``expected`` and ``actual`` (both ``{point_id: payload}``)."""
    return VerifyReport(
        points_expected=len(expected),
        points_in_store=len(actual),
        missing=sorted(set(expected) - set(actual)),
        orphans=sorted(set(actual) - set(expected)),
        drift=sorted(pid for pid in set(expected) & set(actual) if expected[pid] != actual[pid]),
    )
