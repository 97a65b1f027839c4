"""Executors for tests of the console's and the CLI's change paths without a cluster: the
cluster taken to be as the plan (or the journal) left it, and a prediction given."""

from __future__ import annotations

from stormdeck.advisors.apply import Executor
from stormdeck.advisors.blast import Prediction
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Entry, Journal
from stormdeck.advisors.plan import Plan


class AsPlanned(Executor):
    """An executor with no cluster whose reads find each value as the plan saw it and each
    journaled value as its entry left it: a review's checks pass, so what a test looks at
    is the dialog, the keys, the order of the calls. Changes themselves still go through
    the actuators (a host's tuned-adm of the test's own), or fail for want of a cluster."""

    def current(self, c: Change) -> str | None:
        return c.current

    def check_undo_stale(self, entry: Entry, inverse: Change) -> None:
        return None


class Predicting(AsPlanned):
    """An executor whose prediction is given (no cluster): the undo guard's own logic."""

    def __init__(self, journal: Journal, prediction: Prediction | None) -> None:
        super().__init__(journal)
        self.given = prediction
        self.asked: list[Plan] = []

    def prediction(self, plan: Plan) -> Prediction | None:
        self.asked.append(plan)
        return self.given
