"""A source that exists only for tests: declared and built in this one module."""

from __future__ import annotations

import argparse
import time

from stormdeck.collectors.declaration import Option, SourceDeclaration
from stormdeck.collectors.model import Cluster, Partial

NAME = "throwaway"
FAIL = "fail"  # the URL that makes it refuse every poll


class ThrowawaySource:
    """Answers with a healthy cluster of its own, or fails every poll (url == FAIL)."""

    name = NAME

    def __init__(self, url: str) -> None:
        self.url = url
        self.closed = False

    def poll(self) -> Partial:
        if self.url == FAIL:
            raise ConnectionRefusedError(f"{self.url}: the throwaway source refuses")
        return Partial(source=NAME, time=time.time(),
                       cluster=Cluster(fsid="00000000-0000-4000-8000-000000000043",
                                       health="HEALTH_OK"))

    def close(self) -> None:
        self.closed = True


def make(args: argparse.Namespace) -> ThrowawaySource | None:
    url = getattr(args, "throwaway_url", None)
    return ThrowawaySource(url) if url else None


DECLARATION = SourceDeclaration(
    name=NAME,
    parts=("cluster", "disks", "throwaway_part"),
    scope="cluster",
    enabled_by=("throwaway_url",),
    options=(Option(("--throwaway-url",), {"metavar": "URL", "default": None,
                                            "help": "read the throwaway source at URL"}),),
    title="Throwaway (a test's own source)",
    validate=True,
    make=make,
)
