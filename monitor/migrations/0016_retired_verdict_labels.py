"""Stored verdicts with a label of the retired engine get the label of the one label set.

The retired engine (``evals.stats.verdict.decide``) wrote ``numerics_scale_difference`` and
``different_model``; both meant that a test rejected. /metrics, the API schema and the pages
know only ``evals.stats.labels.LABELS``, so such a run exported all zeros on /metrics and
would not validate against the API schema. The mapping is what ``labels.judge`` says of the
same evidence: a significant McNemar (Holm-adjusted, as both engines adjusted it) is a
capability difference, any other rejection is "outputs differ". The stored sentence, the
record of what the run said when it ran, is kept. The pairs' generation moves on so no cached
page shows the old label.
"""

from django.db import migrations
from django.db.models import F

RETIRED = ("numerics_scale_difference", "different_model")
WORDS = {"outputs_differ": "outputs differ", "capability_difference": "capability difference"}


def relabel(apps, schema_editor):
    Run = apps.get_model("monitor", "Run")
    Pair = apps.get_model("monitor", "Pair")
    pairs = set()
    runs = Run.objects.filter(summary__verdict__label__in=RETIRED).only("id", "pair_id", "summary")
    for run in runs.iterator(chunk_size=500):
        verdict = dict(run.summary["verdict"])
        mcnemar = (verdict.get("adjusted_p_values") or {}).get("mcnemar")
        alpha = verdict.get("alpha", 0.05)
        label = "capability_difference" if mcnemar is not None and mcnemar < alpha else "outputs_differ"
        verdict.update(label=label, label_words=WORDS[label])
        Run.objects.filter(id=run.id).update(summary={**run.summary, "verdict": verdict})
        pairs.add(run.pair_id)
    Pair.objects.filter(id__in=pairs).update(generation=F("generation") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("monitor", "0015_pair_generation"),
    ]

    operations = [migrations.RunPython(relabel, migrations.RunPython.noop)]
