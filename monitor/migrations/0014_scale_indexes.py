"""Indexes for a year of 50 pairs (docs/benchmarks.md "At 10 M samples").

Drop the single-column indexes of ``Sample.run`` and ``Sample.endpoint``: the (run, tier) and
(endpoint, started_at) indexes start with the same columns and serve every lookup (146 MB at
10 M samples). Add ``run_pair_status`` on runs: the /metrics scrape counts runs by pair and
status, a whole-table scan at every scrape without it.

Only the indexes are dropped (``DROP INDEX``, instant). Django's own AlterField would also drop
and re-add both foreign keys, re-validating every sample row under a lock: minutes at 10 M.
The index names are the ones Django generated (deterministic: table, column, hash).
"""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = {"run_id": "monitor_sample_run_id_e1725856",
           "endpoint_id": "monitor_sample_endpoint_id_d5731b24"}


class Migration(migrations.Migration):

    dependencies = [
        ("monitor", "0013_capability_rollups"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="sample",
                    name="endpoint",
                    field=models.ForeignKey(db_index=False,
                                            on_delete=django.db.models.deletion.PROTECT,
                                            related_name="samples", to="monitor.endpoint"),
                ),
                migrations.AlterField(
                    model_name="sample",
                    name="run",
                    field=models.ForeignKey(db_index=False,
                                            on_delete=django.db.models.deletion.CASCADE,
                                            related_name="samples", to="monitor.run"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f"DROP INDEX IF EXISTS {name}",
                                  f"CREATE INDEX IF NOT EXISTS {name} ON monitor_sample ({column})")
                for column, name in INDEXES.items()
            ],
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["pair", "status"], name="run_pair_status"),
        ),
    ]
