"""The command palette's stormdeck commands: views, clusters, go to a time, report, findings."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from stormdeck.base.text import printable
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content


class StormdeckCommands(Provider):
    """Everything the keys do, findable by name (typing "view" or a rule id finds it)."""

    def commands(self) -> Iterator[tuple[str, Callable[[], Any], str]]:
        """(text, what to run, help) for each command, derived from the app as it is now."""
        app: Any = self.app
        for binding in app.BINDINGS:
            m = re.fullmatch(r"view\('(\w+)'\)", getattr(binding, "action", ""))
            if m:
                yield (f"View: {binding.description}", partial(app.action_view, m.group(1)),
                       f"key {binding.key}")
        for i, tab in enumerate(app.tabs):
            if len(app.tabs) > 1:
                yield (f"Cluster: {printable(tab.name, 60)}", partial(app.activate_tab, i),
                       "switch to this cluster's tab")
        yield ("Go to a time (HH:MM:SS, or -90 for 90 s back)", app.action_goto, "key g")
        yield ("Back to now", app.action_follow, "key End")
        yield ("Pause or resume the view", app.action_pause, "key p")
        yield ("Write an incident report of the session", app.action_report, "key R")
        yield ("Filter the rows", app.action_filter, "key /")
        yield ("Help: every key", app.action_help, "key ?")
        frame = app.tab.frame
        for f in (frame.findings if frame is not None else ()):
            if f.state != "firing":
                continue
            name = printable(f"{f.rule} on {f.target}", 120)
            if f.changes:
                yield (f"Review the change: {name}", partial(app.review_finding, f),
                       printable(f.summary, 120))
            yield (f"Mute for an hour: {name}", partial(app.mute_finding, f),
                   printable(f.summary, 120))

    async def discover(self) -> Hits:
        for text, run, help_text in self.commands():
            # Content(...) is plain text: a rule target from the cluster is never markup.
            yield DiscoveryHit(Content(text), run, text=text, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, run, help_text in self.commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, Content(text), run, text=text, help=help_text)
