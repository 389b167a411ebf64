"""The client's address for login throttling (django-axes' ``AXES_CLIENT_IP_CALLABLE``).

Behind the README's HTTPS proxy every request comes from the proxy's address, so a lockout
keyed on ``REMOTE_ADDR`` alone locks every user out after one user's ten wrong passwords. The
client's address is read from the proxy's header only when the request really comes from a
proxy listed in ``TIERWATCH_TRUSTED_PROXIES`` (anyone else could write that header); the
header's addresses are read right to left, skipping trusted proxies, so the first one left is
the address the trusted proxy saw. Axes locks out that address together with the username
(``AXES_LOCKOUT_PARAMETERS``).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in settings.TRUSTED_PROXIES)


def client_ip(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    if not _trusted(remote):
        return remote
    header = request.META.get(settings.CLIENT_IP_HEADER, "")
    for address in reversed([a.strip() for a in header.split(",") if a.strip()]):
        if not _trusted(address):
            try:
                return str(ipaddress.ip_address(address))
            except ValueError:
                return remote  # a header the proxy did not write as an address: the proxy's
    return remote
