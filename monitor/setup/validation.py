"""The one set of rules for what an endpoint, a pair and a channel may say, whoever writes them:
the admin and the browser's forms (``full_clean`` through ``Model.clean``), ``apply_config``
(``full_clean`` again) and any API that saves one. Each rule answers with a sentence that names
the value, never raises mid-request: the caller puts it under the field.

Why at validation time: an endpoint's base URL is where the worker sends the vendor's API key
and whose reply it stores and shows. A URL that points inside the network (a database port,
a cloud metadata service) turns the monitor into a way to read it. So a base URL is https, and
a loopback, private, link-local or otherwise non-public address is refused unless the endpoint
is marked ``local`` (the simulated demo vendor, the local llama.cpp vendor, tests). An address
written as a number is judged here by ``evals.addresses.address_problem``; host names are not
resolved here but at connect time, by the same function, on every address the name resolves to
(``evals._wire``): a name that resolves to a private address, now or after a DNS change (DNS
rebinding), is refused there, and the connection goes to the address that was checked.
Only an admin may mark an endpoint local (the add-a-pair page offers it to nobody else).
"""

from __future__ import annotations

import ipaddress
import urllib.parse

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email

from evals.addresses import address_problem

# Names that are the machine itself or a cloud's metadata service whatever DNS says
LOCAL_NAMES = ("localhost", "localhost.localdomain", "metadata.google.internal", "metadata")
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")


def _literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host written as a number means (``127.0.0.1``, ``[::1]``, and the forms
    a resolver also accepts: ``2130706433``, ``0x7f000001``, ``127.1``), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    try:
        numbers = [int(p, 0) if p.lower().startswith("0x") else int(p, 10) for p in parts]
    except ValueError:
        return None
    # inet_aton: the last part fills the remaining bytes (a.b.c.d, a.b.c, a.b, a)
    *head, last = numbers
    if any(not 0 <= n <= 255 for n in head) or not 0 <= last < 256 ** (4 - len(head)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def host_problem(host: str) -> str | None:
    """Why ``host`` is not a public address (loopback, private, link-local, reserved…), or
    None for a public address or a name that is not the machine's own."""
    name = host.lower().rstrip(".")
    if name in LOCAL_NAMES or name.endswith(LOCAL_SUFFIXES):
        return f"{host!r} is this machine or the local network"
    address = _literal_address(name)
    if address is None:
        return None
    if problem := address_problem(address):
        return f"{host!r} is {problem}"
    return None


def base_url_problem(url: str, *, local: bool) -> str | None:
    """Why ``url`` may not be an endpoint's base URL, or None. https only (http for a local
    endpoint), a scheme written out (``api.openai.com/v1`` is not guessed), a host, no user
    or password in it, and a public address unless ``local``."""
    text = (url or "").strip()
    if not text:
        return "required, e.g. https://api.vendor.com/v1"
    parts = urllib.parse.urlsplit(text)
    if not parts.scheme or "://" not in text:
        return f"{text[:80]!r} has no scheme: write it out, e.g. https://{text[:60]}"
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        return (
            f"{text[:80]!r}: {scheme}:// is not allowed (https://, or http:// for a local endpoint)"
        )
    try:
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:
        return f"{text[:80]!r}: {exc}"
    if not host:
        return f"{text[:80]!r} has no host"
    if parts.username or parts.password:
        return f"{text[:80]!r}: no user or password in the URL (a key goes in api_key_env)"
    if scheme == "http" and not local:
        return (
            f"{text[:80]!r}: http:// sends the key in clear; use https://, or mark the "
            "endpoint local (a server on this machine or network)"
        )
    if not local and (problem := host_problem(host)):
        return (
            f"{problem}: only an endpoint marked local may point there (the key and the "
            "replies would go inside the network)"
        )
    try:
        URLValidator(schemes=["http", "https"])(text)
    except ValidationError:
        return f"{text[:80]!r} is not a valid URL"
    return None


def webhook_problem(url: str, secret_env: str) -> str | None:
    """A webhook target: https (http only to this machine, for a receiver beside tierwatch),
    with a host, and signed: without ``secret_env`` a receiver cannot tell tierwatch's alert
    from anyone's POST, so it is refused rather than sent unsigned."""
    text = (url or "").strip()
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"{text[:80]!r}: a webhook URL must be https:// (or http:// to this machine)"
    if parts.scheme == "http" and host_problem(parts.hostname) is None:
        return f"{text[:80]!r}: http:// only to this machine or network; use https://"
    if not secret_env:
        return "a webhook needs secret_env (the variable holding its HMAC signing secret)"
    return None


def email_problem(target: str) -> str | None:
    """Comma-separated addresses, each one Django's ``validate_email`` accepts and nothing a
    mail header or a page could take as markup."""
    addresses = [a.strip() for a in target.split(",") if a.strip()]
    if not addresses:
        return "at least one email address"
    for address in addresses:
        try:
            if any(c in address for c in "<>\"'\\ \t\r\n"):
                raise ValidationError("markup")
            validate_email(address)
        except ValidationError:
            return f"{address[:80]!r} is not an email address"
    return None


def pair_problems(*, fast_id: int | None, base_id: int | None, repeat: int | None) -> dict:
    """A pair compares two different endpoints, each case at least once per tier."""
    problems = {}
    if fast_id is not None and fast_id == base_id:
        problems["base"] = "fast and base must be different endpoints"
    if repeat is not None and repeat < 1:
        problems["repeat"] = f"must be ≥ 1 (got {repeat})"
    return problems


def threshold_problem(metric: str, unit: str, threshold: float | None) -> str | None:
    """A rule's threshold in its metric's range: a rate ("%") is a fraction of 1, stored as
    0.95 for 95 % (a threshold of 2 read as "200 %" could never be crossed), and an
    availability of 0 is never below it."""
    if threshold is None or unit != "%":
        return None
    low_ok = threshold > 0 if metric == "availability" else threshold >= 0
    if not (low_ok and threshold <= 1):
        interval = "(0, 1]" if metric == "availability" else "[0, 1]"
        return f"{metric} is a fraction in {interval}, e.g. 0.95 for 95 % (got {threshold!r})"
    return None
