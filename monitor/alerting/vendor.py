"""The alert of a vendor that fails a run: open while the pair's runs fail because their
requests mostly failed (a missing key, a 401, a closed port), resolved by the pair's next done
run. One alert per pair however many runs fail, and it says what failed (the run's error),
so the one alert a team lead receives names the cause instead of a pass rate of 0 %. Not
opened while a rule on the pair's error rate or availability has an alert open: that one
already carries the run's error.
"""

from __future__ import annotations

from monitor.alerting import lifecycle
from monitor.alerting.alerts import HEALTH_METRICS, pair_link
from monitor.models import Alert, Run
from monitor.runs.watchdog import system_rules

METRIC = "vendor_failed"


def _open(pair_id: int):
    return Alert.objects.filter(pair_id=pair_id, rule__metric=METRIC, resolved_at__isnull=True)


def health_alert_open(*, run_id: int) -> bool:
    """An alert on the pair's error rate or availability is open: it already says the vendor
    fails (with the run's error, ``alerts._describe``), so no second alert is opened."""
    pair_id = Run.objects.filter(id=run_id).values_list("pair_id", flat=True).first()
    return Alert.objects.filter(
        pair_id=pair_id, rule__metric__in=HEALTH_METRICS, resolved_at__isnull=True
    ).exists()


def failing(*, run_id: int) -> list[Alert]:
    """Open the pair's alert for this failed run unless one is open already."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(id=run_id)
    if _open(run.pair_id).exists():
        return []
    where = f"pair {run.pair.name}" + (" (simulated)" if run.pair.simulated else "")
    message = f"Run {run.id} of {where} failed: {run.error}. {pair_link(run.pair)}"
    opened = []
    for rule in system_rules(METRIC, run.pair):
        alert = Alert.objects.create(rule=rule, pair=run.pair, run=run, message=message)
        opened.append(lifecycle.opened(alert_id=alert.pk))
    return opened


def recovered(*, run_id: int, run: Run | None = None) -> list[Alert]:
    """Resolve the pair's open alert: this run is done, its vendor answered. ``run``: that run
    as its caller just read it, so it is not read again."""
    run = run or Run.objects.only("id", "pair_id").get(id=run_id)
    resolved = []
    for alert_id in _open(run.pair_id).values_list("id", flat=True):
        try:
            resolved.append(
                lifecycle.resolve(
                    alert_id=alert_id, note=f"Resolved: run {run.id} was answered.", send=False
                )
            )
        except lifecycle.LifecycleError:  # resolved meanwhile
            continue
    return resolved
