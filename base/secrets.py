"""What must not leak: options that hold secrets, URLs' passwords, files others could read."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"

# Which option names hold a secret. Ceph marks none: its options' flags
# (src/common/options.h, flag_t: runtime, no_mon_update, startup, cluster_create,
# create, mgr, minimal_conf; src/common/options/y2c.py turns the yaml's `flags:` into
# exactly those) have no "secret", and `config dump`/`config log` return every value
# as set. So the list is by name, from Ceph's own options (src/common/options/*.yaml.in,
# Pacific's 1,810 as `ceph-conf --show-config` lists them) and its mgr modules'
# (mgr/<module>/<option> in the config database), and from Curve's conf keys:
#   a secret: key (a cephx key given as an option), rgw_keystone_admin_password,
#     rgw_keystone_admin_token, rgw_keystone_barbican_password, rgw_crypt_kmip_password,
#     rgw_crypt_default_encryption_key, rgw_opa_token, rgw_sts_client_secret, rgw_sts_key,
#     rgw_crypt_s3_kms_encryption_keys ("id=base64key ...": rgw_kms.cc
#     get_actual_key_from_conf decodes the master keys from it), mgr/dashboard/
#     GRAFANA_API_PASSWORD, mgr/dashboard/RGW_API_SECRET_KEY, mgr/cephadm/registry_password,
#     mgr/influx/password, Curve's s3.sk and s3.ak; and, though they hold a file's name,
#     rgw_ldap_secret and rgw_crypt_kmip_client_key (hiding a path costs nothing);
#   not one, though a word matches: *_per_key (bluestore_freelist_blocks_per_key,
#     rocksdb_bloom_bits_per_key: counts), keyring/keyfile and *_path/*_file (where a
#     secret lives, not the secret), *_key_template, *_token_cache_size,
#     rgw_crypt_vault_secret_engine (kv or transit), mon_keyvaluedb, *_keys counts
#     (osd_deep_scrub_keys, mon_sync_max_payload_keys), jwt_token_ttl,
#     osd_pool_default_erasure_code_profile.
# The rule: the option's last word names a secret (the words are split at _ . / - and
# case is ignored), and the word before it is not "per". A name that means a secret
# though its last word does not say so is listed in SECRET_OPTIONS.
SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "secret", "token", "key", "credential",
    "credentials", "apikey", "sk", "ak",
})
SECRET_OPTIONS = frozenset({"rgw_crypt_s3_kms_encryption_keys"})

_WORD = re.compile(r"[^a-z0-9]+")


def is_secret_option(name: str) -> bool:
    """Whether the option (Ceph's, a mgr module's, Curve's) called `name` holds a secret."""
    lowered = name.lower()
    if lowered in SECRET_OPTIONS or lowered.rpartition("/")[2] in SECRET_OPTIONS:
        return True
    words = [w for w in _WORD.split(lowered) if w]
    if not words or words[-1] not in SECRET_WORDS:
        return False
    return not (len(words) > 1 and words[-2] == "per")


# scheme://userinfo@ anywhere in a text: a value or a message that carries a URL.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#@\s]*)@")


def _masked(userinfo: str) -> str:
    # A user name alone may be a token (https://TOKEN@host), so only "user:" is kept.
    user, colon, _ = userinfo.partition(":")
    return f"{user}:***" if colon and user else "***"


def redact_urls(text: str) -> str:
    """`text` with every URL's password replaced by *** (the user name kept)."""
    return _USERINFO.sub(lambda m: f"{m.group(1)}{_masked(m.group(2))}@", text)


def safe_url(url: str) -> str:
    """The URL to show: its user name kept, its password never (http://u:***@host:9090)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_urls(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{_masked(userinfo)}@{hostport}"))


def redact_value(name: str, value: str | None) -> str | None:
    """An option's value as it may be kept and shown: a secret's replaced, a URL's password
    masked."""
    if value is None:
        return None
    if is_secret_option(name):
        return REDACTED if value != "" else ""
    return redact_urls(value) if "@" in value else value


def write_private(path: Path, data: str | bytes) -> None:
    """Write `path` readable by its owner alone (0600, whatever the umask or its old mode).

    Reports, recordings and state files carry the cluster's layout and values: nobody but
    the user who made them needs to read them.
    """
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        # A file that existed keeps its mode through O_CREAT; a terminal or a pipe
        # (-o /dev/stdout) is not ours to change.
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
