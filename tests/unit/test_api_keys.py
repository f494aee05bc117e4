"""API keys (behaviour §3.1): key configuration, hashing, bearer metadata, the lookup cache, listen addresses."""

from __future__ import annotations

import hashlib

import pytest

from slowave.config import Settings
from slowave.domain.api_keys import (
    KeyConfigError,
    KeyEntry,
    bearer_token,
    display_hash,
    hash_key,
    hashes_equal,
    is_valid_tenant,
    merge_key_configs,
    new_key,
    parse_key_config,
)
from slowave.domain.network import is_loopback_listen_address, listen_host
from slowave.service.tenants import TtlCache

KEY = "swk_" + "k" * 40
KEY_HASH = "sha256:" + hashlib.sha256(KEY.encode()).hexdigest()


def test_hash_is_sha256_of_the_utf8_key_with_its_scheme():
    assert hash_key(KEY) == KEY_HASH
    assert hash_key("clé-très-secrète-123") == "sha256:" + hashlib.sha256("clé-très-secrète-123".encode()).hexdigest()
    assert hash_key(KEY) != hash_key(KEY + "x")


def test_minted_keys_are_long_random_and_recognisable():
    keys = {new_key() for _ in range(50)}
    assert len(keys) == 50
    for k in keys:
        assert k.startswith("swk_") and len(k) == 4 + 43
        assert all(c.isalnum() or c in "-_" for c in k[4:])


def test_constant_time_equality():
    assert hashes_equal(KEY_HASH, KEY_HASH)
    assert not hashes_equal(KEY_HASH, KEY_HASH[:-1] + ("0" if KEY_HASH[-1] != "0" else "1"))
    assert not hashes_equal(KEY_HASH, KEY_HASH[:20])


def test_display_shows_a_prefix_only():
    shown = display_hash(KEY_HASH)
    assert shown.startswith("sha256:" + KEY_HASH[7:19]) and KEY_HASH not in shown


@pytest.mark.parametrize(
    "values, expected",
    [
        ([f"Bearer {KEY}"], KEY),
        ([f"bearer {KEY}"], KEY),
        ([f"BEARER   {KEY} "], KEY),
        ([], None),
        ([KEY], None),  # no scheme
        (["Bearer"], None),
        (["Bearer "], None),
        ([f"Basic {KEY}"], None),
        ([f"Bearer {KEY} extra"], None),  # two tokens
        ([f"Bearer{KEY}"], None),  # no separator
        ([f"Bearer {KEY}", f"Bearer {KEY}"], None),  # repeated header
    ],
)
def test_bearer_metadata(values, expected):
    assert bearer_token(values) == expected


def test_config_lines_with_hashes_plaintext_comments_and_separators():
    other = "another-plaintext-key-0123"
    text = f"""
    # tenant   credential
    acme  {KEY_HASH.upper().replace("SHA256", "sha256")}   # upper-case hex is accepted
    globex={other}
    initech {hash_key("third-key-with-enough-chars")} , hooli {hash_key("fourth-key-with-enough-chars")}
    """
    entries = parse_key_config(text, "keys.txt")
    assert entries == [
        KeyEntry("acme", KEY_HASH),
        KeyEntry("globex", hash_key(other)),
        KeyEntry("initech", hash_key("third-key-with-enough-chars")),
        KeyEntry("hooli", hash_key("fourth-key-with-enough-chars")),
    ]
    assert all(other not in repr(e) for e in entries), "plaintext keys are hashed while parsing"


def test_env_style_list_and_duplicates():
    entries = parse_key_config(f"acme={KEY};acme={KEY},beta {hash_key('b' * 20)}", "SLOWAVE_API_KEYS")
    assert entries == [KeyEntry("acme", KEY_HASH), KeyEntry("beta", hash_key("b" * 20))]


@pytest.mark.parametrize(
    "text, message",
    [
        ("acme", "expected"),
        ("acme sha256:abc", "64 hex digits"),
        ("acme sha256:" + "g" * 64, "64 hex digits"),
        ("acme short-key", "at least 16"),
        ("-acme " + KEY, "tenant names"),
        ("a" * 65 + " " + KEY, "tenant names"),
        ("acme " + KEY + " extra", "expected"),
        (f"acme {KEY}\nbeta {KEY}", "one tenant"),
    ],
)
def test_bad_config_is_refused_without_quoting_keys(text, message):
    with pytest.raises(KeyConfigError) as info:
        parse_key_config(text, "keys.txt")
    assert message in str(info.value)
    assert KEY not in str(info.value) and "short-key" not in str(info.value)
    assert "keys.txt line" in str(info.value)


def test_merging_file_and_environment():
    a = [KeyEntry("acme", KEY_HASH)]
    b = [KeyEntry("acme", KEY_HASH), KeyEntry("beta", hash_key("b" * 20))]
    assert merge_key_configs(a, b) == (KeyEntry("acme", KEY_HASH), KeyEntry("beta", hash_key("b" * 20)))
    with pytest.raises(KeyConfigError, match="one tenant"):
        merge_key_configs(a, [KeyEntry("beta", KEY_HASH)])


def test_tenant_names():
    for good in ("local", "acme", "Acme-2", "a", "team.eu_1", "9lives", "x" * 64):
        assert is_valid_tenant(good), good
    for bad in ("", "-x", ".x", "x" * 65, "a b", "a/b", "é"):
        assert not is_valid_tenant(bad), bad


def test_settings_from_file_and_environment(tmp_path):
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"acme {KEY_HASH}\n")
    settings = Settings.from_env(
        {
            "SLOWAVE_API_KEYS_FILE": str(keys_file),
            "SLOWAVE_API_KEYS": "beta=plaintext-key-for-beta-0001",
            "SLOWAVE_AUTH_CACHE_SECONDS": "0.5",
            "SLOWAVE_ALLOW_INSECURE_BIND": "1",
            "SLOWAVE_TLS_CERT_FILE": "c.pem",
            "SLOWAVE_TLS_KEY_FILE": "k.pem",
            "SLOWAVE_TLS_CLIENT_CA_FILE": "ca.pem",
        }
    )
    assert settings.api_keys == (KeyEntry("acme", KEY_HASH), KeyEntry("beta", hash_key("plaintext-key-for-beta-0001")))
    assert "plaintext-key-for-beta-0001" not in repr(settings)
    assert settings.auth_cache_seconds == 0.5 and settings.allow_insecure_bind
    assert (settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file) == ("c.pem", "k.pem", "ca.pem")
    default = Settings.from_env({})
    assert default.api_keys == () and not default.allow_insecure_bind and default.tls_cert_file is None
    with pytest.raises(KeyConfigError, match="cannot read"):
        Settings.from_env({"SLOWAVE_API_KEYS_FILE": str(tmp_path / "missing")})


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_cache_serves_within_ttl_and_reloads_after_it():
    clock, loads = FakeClock(), []
    cache: TtlCache[str] = TtlCache(5.0, clock=clock)

    def load(value: str):
        return lambda: loads.append(value) or value

    assert cache.get("k", load("v1")) == "v1"
    clock.t += 4.9
    assert cache.get("k", load("v2")) == "v1", "within the TTL the cached answer stands"
    clock.t += 0.2
    assert cache.get("k", load("v3")) == "v3", "after the TTL the database is asked again"
    assert loads == ["v1", "v3"]


def test_cache_disabled_and_bounded():
    clock, loads = FakeClock(), []
    off: TtlCache[int] = TtlCache(0, clock=clock)
    off.get("k", lambda: loads.append(1) or 1)
    off.get("k", lambda: loads.append(2) or 2)
    assert loads == [1, 2], "TTL 0 asks every time: revocation is immediate"
    small: TtlCache[int] = TtlCache(60, max_entries=3, clock=clock)
    for i in range(10):
        small.get(f"k{i}", lambda i=i: i)
    assert len(small._entries) == 3 and set(small._entries) == {"k7", "k8", "k9"}


@pytest.mark.parametrize(
    "addr, loopback",
    [
        ("127.0.0.1:50051", True),
        ("127.3.2.1:0", True),
        ("localhost:50051", True),
        ("LOCALHOST:1", True),
        ("[::1]:50051", True),
        ("[::ffff:127.0.0.1]:1", True),
        ("unix:/tmp/slowave.sock", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        (":50051", False),
        ("8.8.8.8:50051", False),
        ("10.0.0.5:50051", False),
        ("192.168.1.2:1", False),
        ("[2001:db8::1]:50051", False),
        ("example.com:50051", False),
        ("localhost.example.com:1", False),
        ("128.0.0.1:1", False),
    ],
)
def test_loopback_listen_addresses(addr, loopback):
    assert is_loopback_listen_address(addr) is loopback


def test_listen_host():
    assert listen_host("[::1]:0") == "::1"
    assert listen_host("127.0.0.1:5") == "127.0.0.1"
    assert listen_host(":5") == ""
