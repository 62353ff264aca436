"""Browser fixtures: Playwright for Python driving Debian's chromium against pytest-django's live server.

No browser is ever downloaded: the executable is /usr/bin/chromium (installed by .ci/run). One browser per
session; a fresh context (cookies, storage) per test. Loaded as a plugin by the root conftest.py, so the browser
tests in tests/ui/ and the ones against the control plane in tests/cluster/ share one browser (Playwright's sync
API cannot run twice in one process).
"""
import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("GANGWEB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]
# Screenshots always go to test-artifacts/screenshots/ (kept by CI); with GANGWEB_UPDATE_SCREENSHOTS=1
# (`make screenshots`) they also replace the committed ones in docs/screenshots/ that the README shows.
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
PASSWORD = "pw-admin-123"  # tests/conftest.py admin_user
# The strictest policy the dashboard must work under: no inline script or style, nothing from elsewhere. The
# browser reports any violation as a console error, which the tests assert never happens.
STRICT_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
              "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def _with_strict_csp(route):
    from playwright.sync_api import Error

    request = route.request
    if (request.headers.get("content-type") or "").startswith("multipart/"):
        route.continue_()  # Chromium hands interception file uploads without their content: pass them through
        return
    try:
        response = route.fetch(max_redirects=0)  # the browser follows redirects itself, so its URL changes
        route.fulfill(response=response, headers={**response.headers, "content-security-policy": STRICT_CSP})
    except Error:  # the tab closed while an htmx poll was in flight
        pass


@pytest.fixture(scope="session")
def browser():
    """One headless chromium for the whole session."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make themselves (test data,
    # assertions) are still synchronous and safe, so Django must not refuse them while the browser is up.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server):
    """A fresh browser tab (1280×860) whose relative URLs resolve against the live server."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    context.route("**/*", _with_strict_csp)
    context.on("page", watch_errors)
    tab = context.new_page()
    yield tab
    context.close()


def watch_errors(tab):
    """Collect a tab's script errors and console errors (CSP violations among them) in `tab.js_errors`."""
    errors = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.js_errors = errors


def log_in(page, username="admin", password=PASSWORD):
    """Fill in and submit the login form; returns once the overview is shown."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")


@pytest.fixture
def admin_page(page, admin_user, enqueued, queue_syncs):
    """A tab logged in as the platform admin through the login form (reconcile tasks recorded, not sent)."""
    log_in(page)
    return page


def screenshot(page, name: str, docs: bool = True) -> Path:
    """Save a full-page PNG as test-artifacts/screenshots/<name>.png, and as docs/screenshots/<name>.png
    (committed, shown in the README) when GANGWEB_UPDATE_SCREENSHOTS=1."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs and os.environ.get("GANGWEB_UPDATE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (DOCS_SCREENSHOTS / path.name).write_bytes(path.read_bytes())
    return path
