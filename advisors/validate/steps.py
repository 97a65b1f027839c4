"""Where runner.py finds the validation steps and what a step works with, by one name.

Each step lives with its kind: checks.py reads and judges settings (steps 1 and 2),
measure.py loads the cluster and times it (steps 3 to 5), context.py is what they share.
runner.STEPS says the order a run takes.
"""

from stormdeck.advisors.validate.checks import cluster_settings, host_checks
from stormdeck.advisors.validate.context import Cancelled, Ctx, Options
from stormdeck.advisors.validate.measure import cpu_sweep, peering_time, response_curves

__all__ = [
    "Cancelled",
    "Ctx",
    "Options",
    "cluster_settings",
    "cpu_sweep",
    "host_checks",
    "peering_time",
    "response_curves",
]
