"""Every test in this folder is a scenario: a whole sync (or CLI run) against a served site."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest's hook sees every collected item, not only this folder's.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)
