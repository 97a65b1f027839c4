"""The console's views, one module each; they render Frames and never touch the network.

A view is one module here and one registration: a ViewInfo in tui/keys.py (its digit key,
name, help line, and `widget`, "module:Class"). Help, the palette, the key bar, the man
page, the number keys and the console's compose all follow from the registration; this
package lists no view. Any name of a registered view's module is importable from here
(`from stormdeck.tui.views import Overview`), found through the registry.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from stormdeck.tui.keys import VIEWS, ViewInfo
from stormdeck.tui.views.base import FrameText, JournalChanged, View

__all__ = ["FrameText", "JournalChanged", "View", "view_class"]

# Modules of views' parts that are not views themselves (a daemon's detail screen).
_HELPERS = ("stormdeck.tui.views.detail",)


def view_class(info: ViewInfo) -> type[View]:
    """The widget class a registration names; a name that is no View is said at once."""
    cls = getattr(import_module(info.module), info.class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, View)):
        raise TypeError(f"view {info.id!r}: {info.widget} is not a View")
    if getattr(cls, "view_id", info.id) != info.id:
        raise TypeError(f"view {info.id!r}: {info.widget} says view_id {cls.view_id!r}")
    return cls


def __getattr__(name: str) -> Any:
    # `from stormdeck.tui.views import X`, for X of any registered view's module: no list
    # of names kept here beside the registry.
    for module in (*dict.fromkeys(v.module for v in VIEWS), *_HELPERS):
        mod = import_module(module)
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
