"""``/health``: the database, the broker, a worker, beat, the probe schedules and the queue of
runs waiting (its depth and the oldest's age), for an outside uptime check.

No login, JSON, HTTP 200 when every check passes and 503 otherwise, each check with its latency
and a reason. Beat is judged by the last time the watchdog ran (it runs from beat, in a worker),
so a monitor that stopped checking itself is seen from outside. Reasons carry exception classes
and messages with any password removed; never a URL, a key or a setting's value.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

PING_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str
    latency_ms: float = 0.0


def _secrets() -> list[str]:
    found = [settings.DATABASES["default"].get("PASSWORD") or ""]
    found.append(urlsplit(settings.CELERY_BROKER_URL).password or "")
    return [s for s in found if s]


def failure(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]
    text = re.sub(r"//[^/@\s]*@", "//***@", text)  # credentials in any URL
    for secret in _secrets():
        text = text.replace(secret, "***")
    return text


def check_database() -> Check:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return Check(True, f"{connection.vendor} answered")


def check_broker() -> Check:
    url = settings.CELERY_BROKER_URL
    if url.startswith(("redis://", "rediss://")):
        import redis

        client = redis.Redis.from_url(
            url, socket_timeout=PING_TIMEOUT_S, socket_connect_timeout=PING_TIMEOUT_S
        )
        try:
            client.ping()
        finally:
            client.close()
        return Check(True, "redis answered PING")
    if url.startswith("filesystem://"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".health-"):
            pass
        return Check(True, "filesystem broker folder writable")
    from monitor.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=PING_TIMEOUT_S)
    return Check(True, f"{conn.transport_cls} broker connected")


def check_worker() -> Check:
    from monitor.celery import app

    # limit=1: back at the first reply; without it the ping always waited out its timeout
    replies = app.control.ping(timeout=PING_TIMEOUT_S, limit=1)
    if not replies:
        return Check(False, f"no worker answered a ping within {PING_TIMEOUT_S:.0f} s")
    return Check(True, "a worker answered a ping")


def check_beat() -> Check:
    from monitor.runs.watchdog import last_watchdog_run

    every = float(settings.CELERY_BEAT_SCHEDULE["watchdog"]["schedule"])
    last = last_watchdog_run()
    if last is None:
        return Check(False, "the watchdog has never run (is beat running?)")
    age = (timezone.now() - last).total_seconds()
    when = f"the watchdog last ran {age:.0f} s ago, at {last:%Y-%m-%dT%H:%M:%SZ}"
    if age > 3 * every:
        return Check(False, f"{when}; it runs every {every:.0f} s: beat or worker down")
    return Check(True, when)


def check_schedules() -> Check:
    """The dead man's switch, evaluated here too: the watchdog that alerts on it runs from
    beat in a worker, so with either down only this answer says that pairs went unmeasured."""
    from monitor.runs.watchdog import overdue_schedules

    late, on_time = overdue_schedules(record=False)
    if late:
        return Check(
            False,
            "overdue: "
            + "; ".join(f"pair {pair.name}: {', '.join(why)}" for pair, why in late.items()),
        )
    return Check(True, f"{len(on_time)} scheduled pair(s) on time")


def queue_state() -> dict[str, object]:
    """Runs waiting for a worker, from the database (what the broker holds says nothing of a
    message lost): how many, and the oldest's id and age in seconds."""
    from monitor.models import Run, RunStatus

    queued = Run.objects.filter(status=RunStatus.QUEUED)
    oldest = queued.order_by("created_at", "pk").values("pk", "created_at").first()
    age = (timezone.now() - oldest["created_at"]).total_seconds() if oldest else None
    return {
        "depth": queued.count(),
        "oldest_run": oldest["pk"] if oldest else None,
        "oldest_s": round(age, 1) if age is not None else None,
    }


def check_queue(state: dict[str, object]) -> Check:
    """Fails when the oldest queued run waited longer than ``TIERWATCH_OVERDUE_GRACE_S``: the
    workers are falling behind (or its message was lost) and the schedules will soon be late."""
    if not state["depth"]:
        return Check(True, "no run queued")
    grace = settings.TIERWATCH_OVERDUE_GRACE_S
    reason = (
        f"{state['depth']} run(s) queued, the oldest (run {state['oldest_run']}) "
        f"for {state['oldest_s']:.0f} s"
    )
    if float(state["oldest_s"]) > grace:  # type: ignore[arg-type]
        return Check(False, f"{reason}: longer than {grace:.0f} s, the workers fall behind")
    return Check(True, reason)


def timed(check: Callable[[], Check]) -> Check:
    start = time.perf_counter()
    try:
        result = check()
    except Exception as exc:  # a failed check is a reason in the answer, not a 500
        result = Check(False, failure(exc))
    return Check(result.ok, result.reason, round(1000 * (time.perf_counter() - start), 1))


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    checks = {"database": timed(check_database), "broker": timed(check_broker)}
    if checks["broker"].ok:
        checks["worker"] = timed(check_worker)
    else:  # a ping through a dead broker would only wait for its connection retries
        checks["worker"] = Check(False, "not asked: the broker is down")
    for name, check in (("beat", check_beat), ("schedules", check_schedules)):
        checks[name] = (
            timed(check)
            if checks["database"].ok
            else Check(False, "not known: the database is down")
        )
    queue: dict[str, object] = {}

    def queue_check() -> Check:
        queue.update(queue_state())  # kept for the body's "queue" figures
        return check_queue(queue)

    if checks["database"].ok:
        checks["queue"] = timed(queue_check)
    else:
        checks["queue"] = Check(False, "not known: the database is down")
    ok = all(c.ok for c in checks.values())
    body = {
        "status": "ok" if ok else "fail",
        "checks": {k: asdict(v) for k, v in checks.items()},
        "queue": queue or None,
    }
    return JsonResponse(body, status=200 if ok else 503)
