"""Where a web request comes from, for the audit trail: the client's IP address, or none.

The TCP peer is the client unless it is a trusted proxy (`web.identity.trusted_proxies`). Behind
trusted proxies the client is found in `X-Forwarded-For`, which every proxy appends to: the
right-most entry that is not itself a trusted proxy is the address the nearest proxy we trust saw.
Everything left of it was written by the client, so anyone can put `6.6.6.6` there; it is never
read. An entry that is not a plain IP address (markup, escape characters, a name, an IPv6 zone
such as `fe80::1%eth0`) gives no address at all rather than a guess: the audit stores a valid
address or none.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from starlette.requests import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_HOPS = 32
"""The most `X-Forwarded-For` entries read, from the right: a chain of more trusted proxies than
this is no deployment, and a header of thousands of entries costs no more than this."""

# A proxy may add the client's port: `192.0.2.1:5000`, `[2001:db8::1]:5000`, `[2001:db8::1]`.
_WITH_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<v4>[0-9.]+))(?::(?P<port>[0-9]{1,5}))?$")


def parse_address(text: str) -> Address | None:
    """`text` as an IP address (a port or IPv6 brackets a proxy added are dropped), or None when it
    is anything else. A zone (`%eth0`) means nothing on another host and is refused; an
    IPv4-mapped IPv6 address is the IPv4 address it maps."""
    text = text.strip()
    match = _WITH_PORT.match(text)
    if match:
        if int(match.group("port") or 0) > 65535:
            return None
        text = match.group("v6") or match.group("v4")
    if "%" in text:
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def trusted(address: Address | None, networks: Sequence[Network]) -> bool:
    return address is not None and any(address in network for network in networks)


def peer_address(request: Request) -> Address | None:
    """The TCP peer's address (None for a test client or a Unix socket)."""
    return parse_address(request.client.host) if request.client else None


def client_address(request: Request, networks: Sequence[Network]) -> str:
    """The client's address as text, "" when none can be told (see the module's docstring)."""
    peer = peer_address(request)
    if not trusted(peer, networks):
        return str(peer) if peer is not None else ""
    entries = [e for e in ",".join(request.headers.getlist("x-forwarded-for")).split(",") if e.strip()]
    if not entries:
        return str(peer)
    hops = entries[-MAX_HOPS:]
    for entry in reversed(hops):
        address = parse_address(entry)
        if not trusted(address, networks):
            return str(address) if address is not None else ""
    # Every entry read is a trusted proxy: the client itself sits in a trusted network, and is the
    # left-most entry, unless the chain was longer than we read.
    return str(parse_address(hops[0])) if len(entries) <= MAX_HOPS else ""
