"""``/metrics`` for Prometheus (``monitor.reporting.prometheus``), behind a bearer token.

No token configured (``TIERWATCH_METRICS_TOKEN`` unset) means no endpoint: 404, so an
installation that never set one exposes nothing. A wrong or missing token gets 401.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from monitor.reporting.prometheus import REGISTRY


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.TIERWATCH_METRICS_TOKEN
    if not token:
        raise Http404("set TIERWATCH_METRICS_TOKEN to enable /metrics")
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        response = HttpResponse(
            "a valid bearer token is required\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="tierwatch metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
