"""Who may open a page: signed in (else the login page), and holding the page's permission
(else 403). Permissions are Django's model permissions, granted through the roles in
``monitor.setup.roles``: viewers read, operators also start runs, admins configure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required, permission_required

VIEW_PAIR = "monitor.view_pair"
VIEW_RUN = "monitor.view_run"
VIEW_SAMPLE = "monitor.view_sample"
VIEW_REPORT = "monitor.view_reportarchive"
ADD_RUN = "monitor.add_run"
ADD_PAIR = "monitor.add_pair"  # the add-a-pair page (operators)
VIEW_ALERT = "monitor.view_alert"
CHANGE_ALERT = "monitor.change_alert"  # acknowledge, silence (operators)
ADD_MAINTENANCE = "monitor.add_maintenancewindow"
ADD_REPORT = "monitor.add_reportarchive"  # the Reports page's Generate button (operators)
# an endpoint marked local (self-hosted: http:// and private addresses allowed) is made by
# whoever may change endpoints, the admins: an operator's endpoint reaches public hosts only
MARK_LOCAL = "monitor.change_endpoint"


def requires(perm: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Sign-in first (a redirect), then the permission (a 403, not a login loop)."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        return login_required(permission_required(perm, raise_exception=True)(view))

    return decorate
