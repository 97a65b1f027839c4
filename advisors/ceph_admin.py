"""The few mon and mgr commands that changes and validation need, over one librados connection."""

from __future__ import annotations

import json
from typing import Any

from stormdeck.base.errors import UserError


class Refused(UserError):
    """Ceph answered the command with an error: nothing was changed by it."""


class Unanswered(UserError):
    """Ceph did not answer: a change sent may or may not have been made."""


class CephAdmin:
    """The few mon commands changes need, through a librados connection of its own."""

    def __init__(self, conffile: str | None, client_name: str | None = None,
                 keyring: str | None = None, timeout: float = 10.0,
                 cluster: str = "ceph") -> None:
        from stormdeck.collectors.ceph.connection import CephConnection

        # The connection opens at the first command; close() ends it, and every
        # user calls it (a librados handle holds threads and sockets).
        self.connection = CephConnection(conffile, client_name, keyring, cluster, timeout)

    def close(self) -> None:
        self.connection.close()

    def cmd(self, prefix: str, **args: Any) -> Any:
        return self._send("mon", prefix, args)

    def mgr_cmd(self, prefix: str, **args: Any) -> Any:
        return self._send("mgr", prefix, args)

    def _raw(self, target: str, prefix: str, args: dict[str, Any]) -> bytes:
        """The command's answer as Ceph gave it; Refused when Ceph said no, Unanswered when
        it did not answer (or was never reached)."""
        from stormdeck.collectors.ceph.connection import CommandError, ConnectError, NoAnswer

        try:
            return self.connection.command(target, {"prefix": prefix, **args})
        except ConnectError as exc:  # never reached Ceph: it refused nothing
            raise Unanswered(str(exc)) from None
        except NoAnswer as exc:
            raise Unanswered(f"Ceph did not answer `{prefix}`: {exc}") from None
        except CommandError as exc:
            raise Refused(f"Ceph refused `{prefix}`: {exc}") from None

    def _send(self, target: str, prefix: str, args: dict[str, Any]) -> Any:
        out = self._raw(target, prefix, args)
        try:
            return json.loads(out) if out.strip() else None
        except ValueError:
            # Not Refused: a command that changes something may have been carried out.
            raise Unanswered(f"Ceph's answer to `{prefix}` is not JSON: "
                             f"{out[:80].decode(errors='replace')!r}") from None

    def fsid(self) -> str:
        return str(self.cmd("status")["fsid"])

    def config_db(self, who: str, key: str) -> str | None:
        """The value stored for exactly `who` (None: unset there), as undo needs it.
        `who` may carry a mask: osd/class:ssd, osd/host:node1."""
        section, _, mask = who.partition("/")
        for row in self.cmd("config dump"):
            if row.get("section") == section and row.get("name") == key and \
                    (row.get("mask") or "") == mask:
                return str(row.get("value"))
        return None

    def config_get(self, who: str, key: str) -> str:
        """What `who` gets: `config get` answers entities and sections, not masks."""
        section, _, mask = who.partition("/")
        if mask:
            stored = self.config_db(who, key)
            return stored if stored is not None else self.config_get(section, key)
        out = self._raw("mon", "config get", {"who": who, "key": key})
        # ConfigMonitor answers a key's value bare whatever the format: a string option
        # (osd_mclock_profile's balanced) is not JSON, and json.loads of it failed
        # every apply and undo of one.
        value = _bare(out)
        return "" if value is None else value

    def osds_of_class(self, device_class: str) -> list[int]:
        return [int(i) for i in self.cmd("osd crush class ls-osd", **{"class": device_class})]

    def config_set(self, who: str, key: str, value: str) -> None:
        self.cmd("config set", who=who, name=key, value=value)

    def config_rm(self, who: str, key: str) -> None:
        self.cmd("config rm", who=who, name=key)

    def config_show(self, daemon: str, key: str) -> str | None:
        from stormdeck.collectors.ceph.connection import CommandError

        try:
            out = self.connection.command("mon", {"prefix": "config show", "who": daemon,
                                                  "key": key})
        except CommandError:
            return None  # the daemon is down or does not report its config
        # An empty answer is an empty value, as config_get reads it; None means no answer.
        value = _bare(out)
        return "" if value is None else value

    def config_log_version(self) -> int | None:
        log = self.cmd("config log", num=1)
        return int(log[0]["version"]) if log else None

    def osd_ids(self) -> list[int]:
        return [int(o["osd"]) for o in self.cmd("osd dump")["osds"] if o.get("up")]

    def flags(self) -> set[str]:
        flags = self.cmd("osd dump").get("flags", "")
        return set(flags.split(",") if isinstance(flags, str) else flags)

    def set_flag(self, flag: str, on: bool) -> None:
        self.cmd("osd set" if on else "osd unset", key=flag)

    def osd_flags(self, osd: str) -> set[str]:
        """One OSD's own flags (noup, noin, nodown, noout set by `osd set-group`), as
        `osd dump` lists them in its state beside exists/up."""
        osd_id = int(osd.removeprefix("osd."))
        for o in self.cmd("osd dump")["osds"]:
            if int(o["osd"]) == osd_id:
                return set(o.get("state") or ())
        raise UserError(f"{osd} is not in the OSD map")

    def ok_to_stop(self, osd: str) -> str | None:
        """Why Ceph says `osd` cannot be down now without PGs going inactive, or None when
        it can: the mgr's `osd ok-to-stop` (DaemonServer), which answers EBUSY with the
        reason when PGs would go inactive (K9.3)."""
        osd_id = osd.removeprefix("osd.")
        try:
            out = self.mgr_cmd("osd ok-to-stop", ids=[osd_id])
        except Refused as exc:
            return str(exc)
        if isinstance(out, dict) and out.get("ok_to_stop") is False:
            bad = [str(p) for p in out.get("bad_become_inactive") or ()]
            return f"Ceph says PGs {', '.join(bad[:8]) or '?'} would go inactive"
        return None

    def set_group_flag(self, flag: str, who: str, on: bool) -> None:
        """`ceph osd set-group FLAG WHO` / `unset-group`: a flag for one OSD (or a CRUSH
        node or device class) alone, not the whole cluster."""
        self.cmd("osd set-group" if on else "osd unset-group", flags=flag, who=[who])

    def pool_get(self, pool: str, var: str) -> str:
        out = self.cmd("osd pool get", pool=pool, var=var)
        value = out.get(var) if isinstance(out, dict) else out
        # Ceph's own spelling: a JSON true is "true" to `osd pool set`, Python's "True" is not.
        return str(value).lower() if isinstance(value, bool) else str(value)

    def pool_target(self, pool: str, var: str) -> str | None:
        """Where pg_num or pgp_num is heading: the target the mon keeps (`osd dump`'s
        pg_num_target) while the mgr steps the value itself toward it; None if unknown."""
        for p in self.cmd("osd dump").get("pools", ()):
            if p.get("pool_name") == pool and f"{var}_target" in p:
                return str(p[f"{var}_target"])
        return None

    def pool_set(self, pool: str, var: str, value: str) -> None:
        self.cmd("osd pool set", pool=pool, var=var, val=value)


def _bare(out: bytes) -> str | None:
    """A `config get`/`config show` answer for one key: the bare value even in JSON
    format, so 0.000000 parses as JSON and mclock_scheduler does not."""
    text = out.decode(errors="replace").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, bool):
        return str(value).lower()
    # A string option whose value reads as JSON (null, [1]) is still that text.
    return str(value) if isinstance(value, int | float) else text
