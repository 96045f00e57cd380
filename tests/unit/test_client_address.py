"""The address the audit records for a web request: the right-most X-Forwarded-For entry that is
not a trusted proxy, stored only when it is a valid IP address. Hostile headers are data."""

from __future__ import annotations

import ipaddress

import pytest
from starlette.requests import Request

from monitor.expose.web.forwarded import MAX_HOPS, client_address, parse_address

pytestmark = pytest.mark.unit

PROXIES = [ipaddress.ip_network(n) for n in ("10.1.2.0/24", "fd00::/8")]
PROXY = "10.1.2.3"
STRANGER = "198.51.100.9"


def _request(peer: str, *forwarded: str) -> Request:
    headers = [(b"x-forwarded-for", value.encode("latin-1")) for value in forwarded]
    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers, "client": (peer, 40000)}
    return Request(scope)


CASES = [
    # (peer, X-Forwarded-For headers, recorded address)
    (PROXY, ["203.0.113.5"], "203.0.113.5"),
    (PROXY, ["6.6.6.6, 203.0.113.5"], "203.0.113.5"),  # spoofed first entry: never read
    (PROXY, ["6.6.6.6", "203.0.113.5"], "203.0.113.5"),  # two headers are one list
    (PROXY, ["6.6.6.6, 203.0.113.5, 10.1.2.7"], "203.0.113.5"),  # a second trusted proxy
    (PROXY, ["203.0.113.5, <script>alert(1)</script>"], ""),  # right-most untrusted is markup
    (PROXY, ["203.0.113.5, \x1b[31mred\x1b[0m"], ""),  # an escape sequence
    (PROXY, ["\x1b]8;;http://evil\x07"], ""),
    (PROXY, ["not an address"], ""),
    (PROXY, ["999.1.1.1"], ""),
    (PROXY, ["unknown"], ""),
    (PROXY, ["fe80::1%<b>eth0</b>"], ""),  # an IPv6 zone carries any text
    (PROXY, ["6.6.6.6, 2001:db8::7"], "2001:db8::7"),
    (PROXY, ["[2001:db8::7]:4711"], "2001:db8::7"),
    (PROXY, ["203.0.113.5:4711"], "203.0.113.5"),
    (PROXY, ["::ffff:203.0.113.5"], "203.0.113.5"),
    (PROXY, ["2001:DB8:0:0:0:0:0:7"], "2001:db8::7"),  # stored in its one canonical form
    (PROXY, ["6.6.6.6, fd00::1"], "6.6.6.6"),  # every other hop trusted: the left-most is the client
    (PROXY, ["10.1.2.9"], "10.1.2.9"),  # a client inside the proxies' network
    (PROXY, [" , ,203.0.113.5 , "], "203.0.113.5"),
    (PROXY, [""], PROXY),
    (PROXY, [], PROXY),
    (PROXY, [", ".join(["6.6.6.6"] * 5000 + ["203.0.113.5"])], "203.0.113.5"),
    (PROXY, [", ".join(["garbage"] + ["10.1.2.1"] * 5000)], ""),  # more trusted hops than are read
    (PROXY, [", ".join(["203.0.113.5"] + ["10.1.2.1"] * (MAX_HOPS - 1))], "203.0.113.5"),
    (STRANGER, ["6.6.6.6"], STRANGER),  # not a proxy: its header is not believed
    (STRANGER, ["10.1.2.3"], STRANGER),
    ("testclient", ["203.0.113.5"], ""),  # a peer without an IP address
]


@pytest.mark.parametrize(("peer", "forwarded", "expected"), CASES)
def test_the_recorded_address_is_the_right_most_untrusted_one_or_none(
    peer: str, forwarded: list[str], expected: str
) -> None:
    address = client_address(_request(peer, *forwarded), PROXIES)
    assert address == expected
    assert address == "" or str(ipaddress.ip_address(address)) == address


@pytest.mark.parametrize(
    "text", ["", " ", "1.2.3", "1.2.3.4.5", "::g", "[::1", "1.2.3.4:99999", "\x00", "é", "fe80::1%eth0"]
)
def test_what_is_not_an_ip_address_parses_to_none(text: str) -> None:
    assert parse_address(text) is None
