"""End-to-end tests need dockerd, the lab image and minutes: they run only with --run-e2e
(scripts/test e2e runs `pytest -q tests/e2e --run-e2e`); plain `pytest tests` skips them, saying why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_lab import cli, summary


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


@pytest.fixture(scope="session")
def lab() -> Iterator[None]:
    """The lab host of inventory/lab.yml (a systemd container), created as the README does; destroyed
    at the end of the e2e session."""
    created = cli("lab", "create")
    assert created.returncode == 0, created.stderr
    assert "systemd running" in created.stdout or "systemd degraded" in created.stdout
    again = cli("lab", "create")
    assert again.returncode == 0
    assert "nothing to do" in again.stdout
    yield
    destroyed = cli("lab", "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert cli("lab", "status").returncode == 1


@pytest.fixture(scope="session")
def converged_lab(lab: None) -> dict[str, object]:
    """The README's main command on the lab host: the first `sglang-deploy up` (a full converge);
    its rc, output and summary.json for the tests that check them."""
    first = cli("up")
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
    return {"rc": first.returncode, "stdout": first.stdout, "summary": summary()}
