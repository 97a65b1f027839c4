"""The HTTP side of the Prometheus source: one pooled, authenticated session and its queries."""

from __future__ import annotations

from typing import Any

from stormdeck.base.secrets import redact_urls, safe_url

try:  # several times faster than json on a fleet's answers; json where the wheel is missing
    from orjson import JSONDecodeError as _JSONError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; a bare install still reads
    from json import JSONDecodeError as _JSONError  # type: ignore[assignment]
    from json import loads as _loads  # type: ignore[assignment]


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
        session.mount(self.url, HTTPAdapter(pool_connections=1,
                                            pool_maxsize=self.concurrency,
                                            max_retries=no_retry))

    def close(self) -> None:
        self._session.close()

    def query(self, expr: str, name: str, at: float | None = None) -> list[dict[str, Any]]:
        """One instant query's samples, each shape-checked, evaluated at `at` (epoch
        seconds; None: Prometheus' now); `name` is for messages."""
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
