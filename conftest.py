"""Root pytest configuration: mark the process as a test run before Django settings load."""
import os

os.environ.setdefault("GANGWEB_TESTING", "1")
