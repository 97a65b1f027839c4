"""The HTTP side of the Prometheus source: one pooled, authenticated session and its queries."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from stormdeck.base.secrets import redact_urls, safe_url

try:  # several times faster than json on a fleet's answers; json where the wheel is missing
    from orjson import JSONDecodeError as _JSONError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; a bare install still reads
    from json import JSONDecodeError as _JSONError  # type: ignore[assignment]
    from json import loads as _loads  # type: ignore[assignment]


# A vector answer as Prometheus writes it (web/api/v1's JSON: no spaces, each sample's
# labels in name order, the value a string): read by one regular expression per label
# set, in C, where orjson would make five objects per sample (1.5 s of a read's client
# CPU at 10,000 OSDs). Anything else (another shape, escapes in a label, labels we did
# not ask for) fails the count below and is decoded the general way.
_VECTOR_HEAD = '{"status":"success","data":{"resultType":"vector","result":['
_SAMPLE = '"value":['
_PATTERNS: dict[tuple[str, ...], re.Pattern[str]] = {}


def _pattern(labels: tuple[str, ...]) -> re.Pattern[str]:
    """The labels' values as one group (for several, joined as they stand in the text,
    split once per key by `_keys`), then the value."""
    pat = _PATTERNS.get(labels)
    if pat is None:
        inner = '","'.join(f'{re.escape(label)}":"[^"\\\\]*' for label in labels)
        inner = inner.replace(f'{re.escape(labels[0])}":"', "", 1)
        pat = _PATTERNS[labels] = re.compile(
            r'\{"metric":\{"' + re.escape(labels[0]) + '":"(' + inner
            + r')"\},"value":\[[^,\]]*,"([^"\\]*)"\]\}')
    return pat


# Joined label values -> their tuple, per label set: the keys of a fleet's answers are the
# same from one scrape to the next, so each is split once. Bounded, for a fleet that churns.
_KEYS: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
_KEYS_MAX = 1 << 20


def _keys(joined: tuple[str, ...], labels: tuple[str, ...]) -> list[tuple[str, ...]]:
    known = _KEYS.setdefault(labels, {})
    try:  # a fleet's keys are the last read's: looked up in C, nothing split
        return list(map(known.__getitem__, joined))
    except KeyError:
        pass
    if len(known) > _KEYS_MAX:
        known.clear()
    seps = [f'","{label}":"' for label in labels[1:]]
    out = []
    for key in joined:
        # Kept here as made, not looked up again: another thread's clear() above may
        # run between the two.
        split = known.get(key)
        if split is None:
            parts, rest = [], key
            for sep in seps:
                head, _, rest = rest.partition(sep)
                parts.append(head)
            split = known[key] = (*parts, rest)
        out.append(split)
    return out


def column(text: str, labels: tuple[str, ...]) -> dict[Any, float] | None:
    """A vector answer's finite values keyed by `labels` (the one label's value, or a
    tuple of them), read straight from Prometheus' text; None where the text is not
    exactly a vector of samples with those labels alone, for the general decoder."""
    if not text.startswith(_VECTOR_HEAD):
        return None
    found = _pattern(labels).findall(text)
    if len(found) != text.count(_SAMPLE):
        return None
    if not found:
        return {}
    # Keys and values apart, each in one pass in C; a key sent twice keeps its last
    # value, as a dict of the pairs would (Prometheus sends none twice).
    keys, values = zip(*found, strict=True)
    try:
        out: dict[Any, float] = dict(zip(keys if len(labels) == 1 else _keys(keys, labels),
                                         map(float, values), strict=True))
    except ValueError:  # a value that is no number: the general path skips it alone
        return None
    if not all(map(math.isfinite, out.values())):  # NaN, +Inf: no figure, as in column_of
        out = {k: v for k, v in out.items() if math.isfinite(v)}
    return out


def column_of(samples: list[dict[str, Any]], labels: tuple[str, ...]) -> dict[Any, float]:
    """`column` of decoded, shape-checked samples: each one's finite value keyed by
    `labels`, samples lacking one of them left out."""
    out: dict[Any, float] = {}
    one = len(labels) == 1
    for s in samples:
        m = s["metric"]
        key = tuple(m.get(label) for label in labels)
        if not all(type(k) is str for k in key):
            continue
        try:
            v = float(s["value"][1])
        except (IndexError, TypeError, ValueError):
            continue
        # The last sample of a key decides, as in `column` (Prometheus sends none twice).
        if math.isfinite(v):
            out[key[0] if one else key] = v
        else:
            out.pop(key[0] if one else key, None)
    return out


class PrometheusError(Exception):
    """Prometheus did not answer or refused a query; the text says which."""


def _secret(path: str) -> str:
    """A token or password from its file, without the newline editors add."""
    from stormdeck.base.files import read_text

    # A regular file of at most 64 KiB: a FIFO or /dev/zero named here must not hang.
    return read_text(path, 64 << 10).strip()


class PrometheusClient:
    """Instant queries against one Prometheus, `concurrency` connections kept alive.

    https is verified against the system's CAs, or `ca`; `insecure` alone turns
    that off. `token_file` (a bearer token) or `user` with `password_file` (basic
    auth) authenticate; the secrets are read from files so that they never sit on
    a command line. `org_id` is sent as X-Scope-OrgID: the tenant of a Mimir, Cortex
    or Loki-style multi-tenant Prometheus API.
    """

    def __init__(self, url: str, timeout: float = 10.0, ca: str | None = None,
                 insecure: bool = False, token_file: str | None = None,
                 user: str | None = None, password_file: str | None = None,
                 concurrency: int = 8, org_id: str | None = None) -> None:
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        # What messages show: a password in the URL (http://user:pw@host) never is.
        self.shown_url = safe_url(self.url)
        self.timeout = timeout
        if ca and insecure:
            raise ValueError("a CA to verify with and no verification contradict each other")
        session = requests.Session()
        # Given with each request, not only set on the session: requests lets
        # $REQUESTS_CA_BUNDLE / $CURL_CA_BUNDLE override a session's verify (requests #3829),
        # and the operator's --prometheus-ca must win over the environment.
        self._verify: str | bool = ca if ca else not insecure
        session.verify = self._verify
        if insecure:
            # Asked for by name; a warning per request would only bury the console.
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        headers: dict[str, str] = {}
        auth = None
        if token_file:
            headers["Authorization"] = f"Bearer {_secret(token_file)}"
        if org_id:
            if any(c in org_id for c in "\r\n\0"):
                raise ValueError("a tenant (X-Scope-OrgID) is one line of text")
            headers["X-Scope-OrgID"] = org_id
        if user is not None:
            if token_file:
                raise ValueError("a bearer token and basic auth exclude each other")
            auth = (user, _secret(password_file) if password_file else "")
        # No retries (urllib3 would back off and retry), which would turn a hung server
        # into a poll of many timeouts; the next poll is our retry.
        no_retry = Retry(total=0, raise_on_status=False)
        self._headers = headers or None
        self._auth = auth
        # An adapter for the URL sized to the queries in flight (requests' default keeps
        # 10), so no connection is opened and dropped per poll.
        self.concurrency = max(1, concurrency)
        self._session = session
        # Per query and key labels: its last answer's length and digest (both less the
        # instants; the digest None after an answer whose length moved, until the next
        # of the same length) and the column read from it.
        self._columns: dict[tuple[str, tuple[str, ...]],
                            tuple[int, bytes | None, dict[Any, float]]] = {}
        session.mount(self.url, HTTPAdapter(pool_connections=1,
                                            pool_maxsize=self.concurrency,
                                            max_retries=no_retry))

    def close(self) -> None:
        self._session.close()

    def query_column(self, expr: str, name: str, at: float | None,
                     labels: tuple[str, ...]) -> dict[Any, float]:
        """One instant query's finite values keyed by `labels` (a label's value, or a
        tuple of them for several); samples lacking one of them are left out."""
        body = self._get(expr, name, at)
        # An answer that says what the last one said, but for the instant every sample
        # carries, is the last column, the same object: not read again, and the source
        # sees at once (by identity) that nothing in it changed. Most of a fleet's
        # states, counts and sizes stand still from one scrape to the next.
        start = body.find(b'"value":[')
        stamp = body[start:body.find(b",", start) + 1] if start >= 0 else b""
        # Its length less the instants first (a count, in C): a rate that moved most
        # often moves the length too, and then nothing is hashed. SHA-256 runs on the
        # CPU's SHA extensions where there are some, twice BLAKE2b's speed here.
        size = len(body) - body.count(stamp) * len(stamp) if stamp else len(body)
        last = self._columns.get((expr, labels))
        digest = None
        if last is None or last[0] == size:
            digest = hashlib.sha256(body.replace(stamp, b"") if stamp else body).digest()
            if last is not None and last[1] == digest:
                return last[2]
        try:
            text = body.decode()
        except UnicodeDecodeError:
            text = ""
        fast = column(text, labels)
        if fast is not None:
            self._columns[(expr, labels)] = (size, digest, fast)
            return fast
        out = column_of(self._samples(body, name), labels)
        self._columns[(expr, labels)] = (size, digest, out)
        return out

    def query(self, expr: str, name: str, at: float | None = None) -> list[dict[str, Any]]:
        """One instant query's samples, each shape-checked, evaluated at `at` (epoch
        seconds; None: Prometheus' now); `name` is for messages."""
        return self._samples(self._get(expr, name, at), name)

    def _get(self, expr: str, name: str, at: float | None) -> bytes:
        """The body of Prometheus' answer to one instant query; PrometheusError if none."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            # Sent on our session, not through the client's custom_query: that decodes
            # with requests' .json() (the body guessed for its charset, copied to str,
            # then simplejson), where orjson reads the bytes as they came.
            response = self._session.get(f"{self.url}/api/v1/query", params=params,
                                         headers=self._headers, auth=self._auth,
                                         timeout=self.timeout, verify=self._verify)
            status, body = response.status_code, response.content
        except Exception as exc:  # requests' connection errors and timeouts
            from requests.exceptions import SSLError

            if isinstance(exc, SSLError):
                raise PrometheusError(f"Prometheus at {self.shown_url}: its certificate could not "
                                      "be verified (give the CA with --prometheus-ca FILE, "
                                      "or --prometheus-insecure)") from None
            raise PrometheusError(f"Prometheus at {self.shown_url} did not answer: "
                                  f"{type(exc).__name__}") from None
        if status in (401, 403):
            raise PrometheusError(
                f"Prometheus at {self.shown_url} refused our credentials "
                f"(HTTP Status Code {status}): set prometheus_token_file, or "
                "prometheus_user and prometheus_password_file, for this cluster in the "
                "config file")
        if status != 200:
            raise PrometheusError(f"Prometheus refused the {name} query: "
                                  f"{redact_urls(f'HTTP Status Code {status} ({body[:500]!r})')}")
        return body

    def _samples(self, body: bytes, name: str) -> list[dict[str, Any]]:
        try:
            result = _loads(body)["data"]["result"]
        except (_JSONError, ValueError, KeyError, TypeError):  # torn, or of another shape
            raise PrometheusError(f"Prometheus at {self.shown_url} answered the {name} query with "
                                  "malformed JSON") from None
        if not isinstance(result, list):
            raise PrometheusError(f"Prometheus answered the {name} query with no vector")
        # Shape-check each sample once here, so the code below can trust it. A sample as
        # Prometheus sends it passes as it is (no copy): 300k of them a read at 10k OSDs.
        out = []
        for s in result:
            if type(s) is not dict:
                continue
            value = s.get("value")
            if type(value) is not list or len(value) != 2:
                continue
            if type(s.get("metric")) is not dict:
                s = {"metric": {}, "value": value}
            out.append(s)
        return out
