"""Root pytest configuration: mark the process as a test run before Django settings load."""
import os

os.environ.setdefault("GANGWEB_TESTING", "1")

# Browser fixtures (browser, page, admin_page) for tests/ui/ and the dashboard test in tests/cluster/; the `built`
# marker and the check that every test using the control plane carries `cluster` (tests/build_markers.py).
pytest_plugins = ["tests.ui.browser", "tests.build_markers"]
