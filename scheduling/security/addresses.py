"""Outbound address rules: which IP addresses gangweb may connect to on a tenant's say-so.

A cluster admin chooses a kubeconfig `server`; later other admins choose webhook targets. Each is a request
gangweb makes from inside the platform's network, so a hostile value could aim it at the platform's own services
(loopback, the pod network, the cloud metadata endpoint) and read their answers back through health messages or
errors (server-side request forgery, OWASP "SSRF Prevention Cheat Sheet"). The rules, for every address a host
name resolves to (all of them must pass, so a name with one public and one private answer is refused):

- Always refused: unspecified (0.0.0.0, ::; Linux connects them to loopback), multicast, broadcast, reserved
  (240.0.0.0/4), and the cloud metadata endpoints (`METADATA_ADDRESSES`: 169.254.169.254 for AWS, GCP, Azure and
  OpenStack, fd00:ec2::254 for AWS over IPv6, 169.254.170.2 for ECS task credentials, 100.100.100.200 for Alibaba).
- Refused unless the install allows them (`AddressPolicy.allowed`): every other non-global address: loopback,
  link-local, private (RFC 1918, unique-local fc00::/7), shared CGNAT (100.64.0.0/10), documentation and
  benchmarking ranges, and IPv4 carried inside IPv6 (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) judged
  as the IPv4.
- Public (global) addresses pass.

`AddressPolicy.parse(value)` reads an install setting: "" / "0" / "off" (nothing extra), "1" / "on" / "all"
(every non-global range above except the always-refused), or a comma-separated list of networks in CIDR
notation ("10.0.0.0/8,127.0.0.0/8"). `cluster_policy()` is the one for cluster API servers
(settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES). The same functions serve any other outbound target: give them
another policy.

DNS rebinding: `resolve(host, port, policy)` returns the checked addresses; the caller connects to one of those
(pinning it, with the host name kept for TLS) instead of resolving again, so the name cannot answer differently
between the check and the connection.
"""
from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from dataclasses import dataclass

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")
BROADCAST = ipaddress.ip_address("255.255.255.255")
TRUE_WORDS = {"1", "true", "yes", "on", "all"}
FALSE_WORDS = {"", "0", "false", "no", "off", "none"}


class AddressRefused(ValueError):
    """An address (or every address of a host name) that the rules refuse. `str()` says which and why, never more
    than the address itself."""


@dataclass(frozen=True)
class AddressPolicy:
    """What an install allows beyond public addresses: `all_private` (every non-global range) or `allowed`
    (these networks). The always-refused addresses stay refused either way."""

    all_private: bool = False
    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, value: str | None) -> AddressPolicy:
        """The policy a setting's text describes (module docstring). Raises ValueError naming a bad network."""
        text = (value or "").strip()
        if text.lower() in FALSE_WORDS:
            return cls()
        if text.lower() in TRUE_WORDS:
            return cls(all_private=True)
        networks = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError as exc:
                raise ValueError(f"'{item}' is not a network in CIDR notation (e.g. 10.0.0.0/8)") from exc
        return cls(allowed=tuple(networks))

    def permits_private(self, address: IPAddress) -> bool:
        """True when this policy lets a non-global `address` through."""
        return self.all_private or any(address.version == n.version and address in n for n in self.allowed)


@functools.lru_cache(maxsize=8)
def _parsed(value: str) -> AddressPolicy:
    return AddressPolicy.parse(value)


def cluster_policy() -> AddressPolicy:
    """The install's policy for cluster API servers: settings.GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES."""
    from django.conf import settings

    return _parsed(str(getattr(settings, "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES", "") or ""))


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d (RFC 4291
    2.5.5.1, deprecated but still routed to the IPv4 address by some stacks), NAT64 64:ff9b::/96, 6to4, Teredo
    server), if any. `::` and `::1` are not IPv4-compatible: they keep their own meaning (unspecified, loopback)."""
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if int(address) >> 32 == 0 and int(address) > 1:  # the top 96 bits zero: IPv4-compatible (issue 32 row 5)
        return ipaddress.IPv4Address(int(address))
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def why_refused(address: IPAddress | str, policy: AddressPolicy) -> str | None:
    """None when `address` may be contacted under `policy`, else a short reason ("loopback", "cloud metadata
    endpoint", ...). Accepts an address object or its text (an unparseable text is refused)."""
    try:
        ip = ipaddress.ip_address(str(address).strip("[]").split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    inner = _embedded_ipv4(ip)
    if inner is not None:
        reason = why_refused(inner, policy)
        return f"{reason} (IPv4 {inner} inside IPv6)" if reason else None
    if ip in METADATA_ADDRESSES:
        return "cloud metadata endpoint"
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_multicast:
        return "multicast address"
    if ip == BROADCAST or (ip.version == 4 and ip.is_reserved):
        return "reserved address"
    if ip.is_global:
        return None
    if policy.permits_private(ip):
        return None
    kind = ("loopback" if ip.is_loopback else "link-local" if ip.is_link_local else
            "private" if ip.is_private else "non-public")
    return f"{kind} address"


def check_ip(address: IPAddress | str, policy: AddressPolicy) -> None:
    """Raise AddressRefused("<address> is a loopback address ...") unless `address` may be contacted."""
    reason = why_refused(address, policy)
    if reason:
        raise AddressRefused(f"{address} is a {reason}; this install does not allow it "
                             "(see docs/security.md, outbound address rules)")


def is_ip_literal(host: str) -> bool:
    """True when `host` ("10.0.0.1", "[::1]", "::1") is an IP address rather than a name."""
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def resolve(host: str, port: int, policy: AddressPolicy) -> list[str]:
    """Every address `host` resolves to (TCP), in resolver order, after checking each against `policy`.

    A literal IP is checked as is (no lookup). Raises AddressRefused when any address is refused (naming the
    first one), and OSError (socket.gaierror) when the name does not resolve.
    """
    if is_ip_literal(host):
        literal = host.strip("[]")
        check_ip(literal, policy)
        return [literal]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise OSError(f"{host} has no address")
    for address in addresses:
        reason = why_refused(address, policy)
        if reason:
            # What a name resolves to stays in the server log: the message is shown to the tenant, and naming the
            # address (or its kind) would map the internal network for them (issue 32 row 7).
            log.info("outbound address rules: %s resolves to %s, a %s: refused", host, address, reason)
            raise AddressRefused(f"{host} is unreachable: it resolves to an address this install does not allow "
                                 "(see docs/security.md, outbound address rules)")
    return addresses
