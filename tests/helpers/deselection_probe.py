"""A pytest plugin for tests/test_conftest_tiers.py: prints every test that ``-m`` deselects, so that one
collection shows both tiers (the selected tests as ``--collect-only -q`` lists them, the rest here)."""

PREFIX = "DESELECTED "


def pytest_deselected(items):
    for item in items:
        print(f"{PREFIX}{item.nodeid}")
