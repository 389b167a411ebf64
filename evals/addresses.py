"""Which addresses an endpoint that is not local may connect to: public ones only.

Why: an endpoint's base URL is where the key goes and whose reply is shown. A URL whose host
is, or resolves to, a loopback, private, link-local or metadata address turns the monitor into
a way to read the network it runs in (a database port, 169.254.169.254). The one rule is
:func:`address_problem`; it is applied twice: to a host written as a number when an endpoint is
saved (``monitor.setup.validation``), and to every address a host name resolves to when the
client connects (``evals._wire``, ``evals.client``), the connection then going to that checked
address (no second lookup that DNS rebinding could answer differently). The connect-time check
is the one healthchecks makes for its webhooks (``INTEGRATIONS_ALLOW_PRIVATE_IPS``: the address
curl is about to open, not the name), with more than ``is_private``: an IPv6 address that carries
an IPv4 address to its destination is judged by that IPv4 address too.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# NAT64: the well-known prefix (RFC 6052) and the local-use one (RFC 8215), the IPv4 address in
# the last 32 bits; a NAT64 gateway turns 64:ff9b::7f00:1 into 127.0.0.1 on its side.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


REFUSED = "only an endpoint marked local may connect there"  # ends every refusal's words


class PrivateAddress(OSError):
    """A host of an endpoint that is not local resolved to an address it may not reach. An
    ``OSError``, as a failed lookup is: both clients report it as a connection failure (its
    words are its ``strerror``, which aiohttp's connection error shows)."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EACCES, message)


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address delivers to, and how it carries it: IPv4-mapped
    (``::ffff:a.b.c.d``), NAT64 (``64:ff9b::a.b.c.d``), 6to4 (``2002:AABB:CCDD::``), Teredo
    (the client's address), IPv4-compatible (``::a.b.c.d``, RFC 4291 §2.5.5.1, deprecated but
    still parsed and routed by some stacks); None for a plain IPv6 address."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in NAT64 or address in NAT64_LOCAL:
        return "NAT64", low32
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]
    if int(address) >> 32 == 0 and int(address) > 1:  # :: and ::1 are judged as IPv6
        return "IPv4-compatible", low32
    return None


def _kind(address: Address) -> str | None:
    """What makes ``address`` not public, in words, or None for a public unicast address."""
    for kind in ("loopback", "link_local", "private", "multicast", "unspecified", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking ranges…
        return "non-public"
    return None


def address_problem(address: Address) -> str | None:
    """Why an endpoint that is not local may not connect to ``address`` ("a loopback
    address", "a NAT64 address of 127.0.0.1, a loopback address"), or None when it may.

    An IPv6 address that carries an IPv4 one is judged by what it delivers to: a NAT64 or
    IPv4-mapped address of a public IPv4 address is allowed (an IPv6-only host behind DNS64
    reaches every vendor that way, although Python counts 64:ff9b::/96 as reserved). The
    local-use NAT64 prefix is a network's own and IPv4-compatible addresses are deprecated:
    both are refused whatever they carry."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in NAT64_LOCAL:
            return "a local-use NAT64 address"
        if (carried := embedded_ipv4(address)) is not None:
            how, inner = carried
            article = "an" if how[0] in "IA" else "a"
            if how == "IPv4-compatible":
                return f"an IPv4-compatible address of {inner} (deprecated)"
            if inner_kind := _kind(inner):
                return f"{article} {how} address of {inner}, a {inner_kind} address"
            if how in ("IPv4-mapped", "NAT64"):
                return None
    if kind := _kind(address):
        return f"a {kind} address"
    return None


def refuse_private(host: str, resolved: list[str]) -> None:
    """Raise :class:`PrivateAddress` naming the first address of ``resolved`` (what ``host``
    resolved to) that is not public. One such address refuses the host: a name that answers
    with a public and a private address would reach the private one on some attempt."""
    for text in resolved:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # a scope id (fe80::1%eth0)
        if problem := address_problem(address):
            said = f"{host} is" if host == text else f"{host} resolves to {text},"
            raise PrivateAddress(f"{said} {problem}: {REFUSED}")


async def resolve_public(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, each checked public (else :class:`PrivateAddress`),
    for a client that then connects to one of them and not to the name."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    resolved = list(dict.fromkeys(str(info[4][0]) for info in infos))
    refuse_private(host, resolved)
    return resolved
