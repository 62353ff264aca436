"""Outbound address rules (scheduling/security/addresses.py): which addresses a tenant-chosen target may have."""
import pytest

from scheduling.security.addresses import AddressPolicy, AddressRefused, check_ip, resolve, why_refused

NOTHING_EXTRA, ALL_PRIVATE = AddressPolicy.parse(""), AddressPolicy.parse("1")
TEN_ONLY = AddressPolicy.parse("10.0.0.0/8, 127.0.0.1/32")


@pytest.mark.parametrize("address, by_default, all_private, ten_only", [
    ("8.8.8.8", None, None, None),
    ("2606:4700:4700::1111", None, None, None),
    ("127.0.0.1", "loopback address", None, None),
    ("127.0.0.2", "loopback address", None, "loopback address"),
    ("::1", "loopback address", None, "loopback address"),
    ("10.1.2.3", "private address", None, None),
    ("172.16.0.1", "private address", None, "private address"),
    ("192.168.1.1", "private address", None, "private address"),
    ("fc00::1", "private address", None, "private address"),
    ("100.64.0.1", "non-public address", None, "non-public address"),
    ("169.254.1.1", "link-local address", None, "link-local address"),
    ("fe80::1", "link-local address", None, "link-local address"),
    ("169.254.169.254", "cloud metadata endpoint", "cloud metadata endpoint", "cloud metadata endpoint"),
    ("fd00:ec2::254", "cloud metadata endpoint", "cloud metadata endpoint", "cloud metadata endpoint"),
    ("100.100.100.200", "cloud metadata endpoint", "cloud metadata endpoint", "cloud metadata endpoint"),
    ("0.0.0.0", "unspecified address", "unspecified address", "unspecified address"),
    ("::", "unspecified address", "unspecified address", "unspecified address"),
    ("224.0.0.1", "multicast address", "multicast address", "multicast address"),
    ("ff02::1", "multicast address", "multicast address", "multicast address"),
    ("255.255.255.255", "reserved address", "reserved address", "reserved address"),
    ("240.0.0.1", "reserved address", "reserved address", "reserved address"),
    ("::ffff:127.0.0.1", "loopback address (IPv4 127.0.0.1 inside IPv6)", None, None),
    ("::ffff:169.254.169.254", "cloud metadata endpoint (IPv4 169.254.169.254 inside IPv6)",
     "cloud metadata endpoint (IPv4 169.254.169.254 inside IPv6)",
     "cloud metadata endpoint (IPv4 169.254.169.254 inside IPv6)"),
    ("64:ff9b::a01:203", "private address (IPv4 10.1.2.3 inside IPv6)", None, None),
    ("2002:7f00:1::", "loopback address (IPv4 127.0.0.1 inside IPv6)", None, None),
    ("not-an-ip", "not an IP address", "not an IP address", "not an IP address"),
])
def test_each_address_is_judged_under_each_policy(address, by_default, all_private, ten_only):
    assert why_refused(address, NOTHING_EXTRA) == by_default
    assert why_refused(address, ALL_PRIVATE) == all_private
    assert why_refused(address, TEN_ONLY) == ten_only


@pytest.mark.parametrize("text, all_private, networks", [
    ("", False, []), ("0", False, []), ("off", False, []), ("1", True, []), ("all", True, []),
    ("10.0.0.0/8,::1/128", False, ["10.0.0.0/8", "::1/128"]), (" 127.0.0.1 ", False, ["127.0.0.1/32"]),
])
def test_the_setting_parses(text, all_private, networks):
    policy = AddressPolicy.parse(text)
    assert policy.all_private is all_private and [str(n) for n in policy.allowed] == networks


def test_a_bad_network_in_the_setting_is_named():
    with pytest.raises(ValueError, match="'10.0.0.300/8' is not a network"):
        AddressPolicy.parse("10.0.0.0/8,10.0.0.300/8")


def test_a_name_is_refused_when_any_of_its_addresses_is():
    assert resolve("127.0.0.1", 443, ALL_PRIVATE) == ["127.0.0.1"]
    assert resolve("[::1]", 443, ALL_PRIVATE) == ["::1"]
    with pytest.raises(AddressRefused, match="localhost is unreachable: it resolves to an address this install does "
                                             "not allow"):
        resolve("localhost", 443, NOTHING_EXTRA)
    with pytest.raises(AddressRefused, match="169.254.169.254 is a cloud metadata endpoint"):
        check_ip("169.254.169.254", ALL_PRIVATE)


@pytest.mark.parametrize(("literal", "inner"), [
    ("::127.0.0.1", "127.0.0.1"), ("[::127.0.0.1]", "127.0.0.1"), ("::ffff:127.0.0.1", "127.0.0.1"),
    ("::10.1.2.3", "10.1.2.3"), ("::169.254.169.254", "169.254.169.254"), ("::ffff:169.254.169.254", "169.254.169.254"),
])
def test_row5_ipv4_mapped_and_compatible_ipv6_fall_under_the_ipv4_rules(literal, inner):
    """Issue 32 row 5: `[::127.0.0.1]` (IPv4-compatible, the top 96 bits zero) passed as a public IPv6 address."""
    assert why_refused(literal, NOTHING_EXTRA) == f"{why_refused(inner, NOTHING_EXTRA)} (IPv4 {inner} inside IPv6)"
    with pytest.raises(AddressRefused, match=f"IPv4 {inner} inside IPv6"):
        resolve(literal, 443, NOTHING_EXTRA)
    # ...and an allowed IPv4 network allows its IPv6 forms alike (never the metadata endpoint).
    allowed = AddressPolicy.parse("127.0.0.0/8,10.0.0.0/8")
    assert (why_refused(literal, allowed) is None) == (why_refused(inner, allowed) is None)


def test_row5_unspecified_loopback_and_public_ipv6_keep_their_own_meaning():
    assert why_refused("::", NOTHING_EXTRA) == "unspecified address"
    assert why_refused("::1", NOTHING_EXTRA) == "loopback address"
    assert why_refused("::8.8.8.8", NOTHING_EXTRA) is None and why_refused("2001:4860::8888", NOTHING_EXTRA) is None
