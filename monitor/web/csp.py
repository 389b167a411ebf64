"""The Content-Security-Policy header on every response that has none yet.

Scripts only from this site (htmx, plotly, ``charts.js``, ``page.js``; no inline script or
handler runs, so markup injected into a page cannot run either); styles from this site and
inline (plotly and htmx write ``style`` attributes and ``<style>`` elements as they draw);
images also as ``data:``/``blob:`` (plotly's "download as PNG"); no plugins, no framing, forms
post only here. The policy is ``settings.CONTENT_SECURITY_POLICY``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY and HEADER not in response:
            response[HEADER] = settings.CONTENT_SECURITY_POLICY
        return response
