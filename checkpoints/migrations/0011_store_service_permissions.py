"""The store service's token kinds: a worker that writes any thread, and naming an owner."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("checkpoints", "0010_values_lz4"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="thread",
            options={
                "ordering": ["-last_write_at"],
                "permissions": [
                    ("store_worker_write", "Can read and write any thread through /store/v1/"),
                    ("store_name_owner", "Can name a thread's owner in configurable.user_id"),
                ],
            },
        ),
    ]
