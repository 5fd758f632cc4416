"""The test suite's shared fixtures, loaded once for every test module (tests/conftest.py
holds the store fixtures and hooks; the modules below hold one concern's fixtures each)."""

pytest_plugins = [
    "tests.admin_fixtures",
    "tests.api_fixtures",
    "tests.browser_fixtures",
    "tests.fast_flush",
    "tests.live_servers",
    "tests.checkpoints.codec.codec_helpers",
    "tests.fuzz_fixtures",
    "tests.pgbouncer",
    "tests.retention_fixtures",
]
