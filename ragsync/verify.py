"""Compare the state DB with the vector store (pure): what `ragsync verify` reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragsync.sparse import SparseVector

SPARSE_TOLERANCE = 1e-5  # stores keep float32 weights


@dataclass
class VerifyReport:
    """Drift between the state DB (the truth) and the vector store (its projection)."""

    points_expected: int = 0
    points_in_store: int = 0
    missing: list[str] = field(default_factory=list)  # known chunks without a point
    orphans: list[str] = field(default_factory=list)  # points no chunk explains
    drift: list[str] = field(default_factory=list)  # points whose payload differs
    # points whose sparse vector is missing or differs (a collection with sparse vectors)
    sparse_drift: list[str] = field(default_factory=list)
    pending_journal: int = 0  # operations a crashed run left unapplied
    repaired: bool = False

    @property
    def clean(self) -> bool:
        drifted = self.missing or self.orphans or self.drift or self.sparse_drift
        return not (drifted or self.pending_journal)

    def to_dict(self) -> dict:
        return {
            "clean": self.clean,
            "repaired": self.repaired,
            "points_expected": self.points_expected,
            "points_in_store": self.points_in_store,
            "missing": self.missing,
            "orphans": self.orphans,
            "drift": self.drift,
            "sparse_drift": self.sparse_drift,
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


def same_sparse(a: SparseVector, b: SparseVector) -> bool:
    """Equal dimensions, and weights equal within float32 rounding."""
    return a.indices == b.indices and all(
        abs(x - y) <= SPARSE_TOLERANCE * max(1.0, abs(x))
        for x, y in zip(a.values, b.values, strict=True)
    )


def sparse_drift(
    expected: Mapping[str, SparseVector], actual: Mapping[str, SparseVector | None]
) -> list[str]:
    """Points in the store whose sparse vector is missing or differs from the one their
    text gives (points missing from the store are :attr:`VerifyReport.missing`)."""
    empty = SparseVector((), ())
    return sorted(
        pid
        for pid, vector in expected.items()
        if pid in actual and not same_sparse(vector, actual[pid] or empty)
    )
