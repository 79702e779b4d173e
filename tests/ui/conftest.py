"""Fixtures of the UI tests: an ``airflow standalone`` of this session against the session's sandbox, and
headless Debian Chromium driven by Playwright (never a downloaded browser).

- ``airflow_ui`` (session): :class:`ui_standalone.RunningAirflow`, healthy, DAG parsed and un-paused, on a free
  port with AIRFLOW_HOME under pytest's tmp dir; stopped (every process of it) at the end of the session.
- ``browser`` (session): Chromium launched from ``/usr/bin/chromium`` (Debian package ``chromium``).
- ``page`` (function): a fresh browser context, logged in to ``airflow_ui`` as ``admin``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ui_standalone  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 1000}
UI_TIMEOUT_MS = 60_000  # per Playwright action/assertion: the api-server answers slowly on a loaded machine


_FAILED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ui: drives the Airflow UI in headless Chromium (Playwright)")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True  # the page fixture then saves a screenshot and the browser's errors
    return report


@pytest.fixture(autouse=True)
def test_deadline(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tell :func:`ui_standalone.time_left_s` when this test's pytest-timeout strikes (its ``timeout`` marker or
    the ini's ``timeout``)."""
    marker = request.node.get_closest_marker("timeout")
    timeout_s = float(marker.args[0] if marker and marker.args else request.config.getini("timeout") or 0)
    ui_standalone.TEST_ENDS_AT = time.monotonic() + timeout_s if timeout_s > 0 else None
    yield
    ui_standalone.TEST_ENDS_AT = None


@pytest.fixture(scope="session")
def airflow_ui(sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ui_standalone.RunningAirflow]:
    """``airflow standalone`` with the shared sandbox's connections (its ``airflow.env``)."""
    home = tmp_path_factory.mktemp("airflow-ui")
    running = ui_standalone.start_airflow(home, Path(sandbox.workdir))
    try:
        yield running
    finally:
        ui_standalone.stop_airflow(home)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's), through Playwright's sync API."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install the Debian package chromium (make debs)")
    sync_api = pytest.importorskip("playwright.sync_api")
    sync_api.expect.set_options(timeout=UI_TIMEOUT_MS)  # assertions too (the context's default covers actions only)
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(
    browser: Any, airflow_ui: ui_standalone.RunningAirflow, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Any]:
    """A new browser context logged in as ``admin`` through the login form (SimpleAuthManager). When the test
    fails: a screenshot ``failure.png`` in its tmp_path, and the browser's errors and failed requests printed."""
    context = browser.new_context(viewport=VIEWPORT, base_url=airflow_ui.base_url)
    context.set_default_timeout(UI_TIMEOUT_MS)
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("requestfailed", lambda req: problems.append(f"request failed: {req.method} {req.url} {req.failure}"))
    try:
        tab.goto("/")
        tab.get_by_label("Username").fill("admin")
        tab.get_by_label("Password").fill(airflow_ui.password)
        tab.get_by_role("button", name="Sign in").click()
        tab.wait_for_url(lambda url: "/auth/login" not in url)
        yield tab
        if request.node.stash.get(_FAILED, False):
            path = tmp_path / "failure.png"
            tab.screenshot(path=str(path))
            print(f"\nfailure screenshot: {path} (page {tab.url})")
            print("\n".join(problems[-30:]) or "no browser errors")
    finally:
        context.close()
