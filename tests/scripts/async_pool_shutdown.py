"""``python async_pool_shutdown.py PORT``: asyncio.run ends while the saver's async pool is
still opening a connection (to a server that never answers), and must return."""

from __future__ import annotations

import asyncio
import sys

import django
from django.conf import settings

settings.configure(
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "HOST": "127.0.0.1",
            "PORT": sys.argv[1],
            "NAME": "nowhere",
            "USER": "postgres",
        }
    },
    USE_TZ=True,
)
django.setup()

from checkpoints.store.postgres.pool import async_statement_cursor  # noqa: E402


async def main() -> None:
    async def use() -> None:
        async with async_statement_cursor("default", "SELECT 1") as cur:
            await cur.execute("SELECT 1")

    try:
        await asyncio.wait_for(use(), 0.5)
    except TimeoutError:
        print("no connection in time, as the server never answers", flush=True)


asyncio.run(main())
print("asyncio.run returned", flush=True)
