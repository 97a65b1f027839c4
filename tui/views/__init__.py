"""The console's views, one module each; they render Frames and never touch the network."""

from stormdeck.tui.views.base import FrameText, JournalChanged, View
from stormdeck.tui.views.daemons import DaemonTable
from stormdeck.tui.views.detail import DaemonDetail, daemon_detail
from stormdeck.tui.views.disks import DisksView, DiskTable, disk_detail
from stormdeck.tui.views.findings import FindingsView, FindingTable, finding_detail
from stormdeck.tui.views.fullness import FullnessView
from stormdeck.tui.views.journal import JournalTable
from stormdeck.tui.views.latency import LatencyTable
from stormdeck.tui.views.leaders import Leaders, pool_primaries
from stormdeck.tui.views.overview import Overview
from stormdeck.tui.views.triage import Triage

__all__ = ["DaemonDetail", "DaemonTable", "DiskTable", "DisksView", "FindingTable",
           "FindingsView", "FrameText", "FullnessView", "JournalChanged", "JournalTable",
           "LatencyTable",
           "Leaders", "Overview", "Triage", "View", "daemon_detail", "disk_detail",
           "finding_detail", "pool_primaries"]
