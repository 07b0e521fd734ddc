"""End-to-end tests need dockerd, the lab image and minutes: they run only with --run-e2e
(scripts/test e2e runs `pytest -q tests/e2e --run-e2e`); plain `pytest tests` skips them, saying why."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-e2e",
        action="store_true",
        default=False,
        help="run the end-to-end tests in tests/e2e (lab container + sglang-deploy up)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end test through the CLI and the lab host (needs --run-e2e)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-e2e", default=False):
        return
    skip = pytest.mark.skip(
        reason="end-to-end test: run with `pytest tests/e2e --run-e2e` (or scripts/test e2e)"
    )
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)
