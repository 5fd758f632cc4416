"""manage.py compact_checkpoint_store: give a store's free space back, or report it."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from checkpoints import from_conn_string
from checkpoints.errors import CheckpointStoreError
from retention.errors import SweepAlreadyRunning
from retention.sweep import compact_store


class Command(BaseCommand):
    help = (
        "SQLite: VACUUM the store under its sweep lease (converting it to incremental "
        "auto_vacuum) and report the file's bytes before and after. PostgreSQL: report the "
        "store's table and index sizes and what VACUUM would reclaim; nothing is run."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--conn-string",
            help="The store to compact (sqlite:///path, postgresql://...); default: the "
            "deployment's store.",
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print the report as JSON."
        )

    def handle(self, *args, conn_string=None, as_json=False, **options):
        try:
            if conn_string:
                with from_conn_string(conn_string) as saver:
                    report = compact_store(saver)
            else:
                report = compact_store()
        except SweepAlreadyRunning as exc:
            raise CommandError(f"not compacted: {exc}") from exc
        except CheckpointStoreError as exc:
            raise CommandError(f"not compacted ({exc.code}): {exc}") from exc
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self.stdout.write(summary(report))


def summary(report: dict) -> str:
    if "bytes_before" in report:  # the store gave the file's space back
        return (
            f"Compacted {report['path']}: {report['bytes_before']:,} -> "
            f"{report['bytes_after']:,} bytes (auto_vacuum {report['auto_vacuum_before']} -> "
            f"{report['auto_vacuum']})"
        )
    lines = [
        f"PostgreSQL store: tables {report['table_bytes']:,} bytes, indexes "
        f"{report['index_bytes']:,} bytes; VACUUM would make ~"
        f"{report['vacuum_reclaims_bytes']:,} bytes reusable (VACUUM FULL not run)"
    ]
    for t in report["tables"]:
        lines.append(
            f"  {t['table']}: table {t['table_bytes']:,} B, indexes {t['index_bytes']:,} B, "
            f"{t['dead_rows']:,} dead of {t['live_rows'] + t['dead_rows']:,} rows, "
            f"~{t['vacuum_reclaims_bytes']:,} B reclaimable"
        )
    return "\n".join(lines)
