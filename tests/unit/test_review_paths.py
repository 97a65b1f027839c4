"""The CLI and the console review and carry out a change the same way: one Review, the
same checks in the same order before anyone is asked, and the change carried out on the
executor (and connection) its review was made with (issue 43)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormdeck.advisors.apply import Executor
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import plan_from_finding
from stormdeck.advisors.review import Review
from stormdeck.cli import main
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import StaticFeed
from stormdeck.tui.views import FindingTable
from tests.unit.test_tui import balanced, confirm_review, frames, open_review, tuned_host

TARGET = "host.tuned_profile|host vm"
CHECKS = ("read-only", "changes", "stale", "runtime", "prediction", "guard")


class Seen:
    """What each path asked of the executors: the reviews made (their checks and
    executor) and the executors their changes were carried out on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reviews: list[tuple[tuple[str, ...], int]] = []
        self.carried: list[int] = []
        review, carry_out = Executor.review, Review.carry_out

        def spy_review(ex: Executor, plan):
            rv = review(ex, plan)
            self.reviews.append((rv.checks, id(ex)))
            return rv

        def spy_carry_out(rv: Review):
            self.carried.append(id(rv.executor))
            return carry_out(rv)

        monkeypatch.setattr(Executor, "review", spy_review)
        monkeypatch.setattr(Review, "carry_out", spy_carry_out)


@pytest.mark.asyncio
async def test_the_cli_and_the_console_make_the_same_checks_on_one_executor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tuned_host(tmp_path, monkeypatch)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    history = frames(balanced)
    seen = Seen(monkeypatch)

    # The console: the finding reviewed from the findings view, then confirmed.
    made = []

    def factory() -> Executor:
        made.append(Executor(Journal(tmp_path / "console.jsonl")))
        return made[-1]

    app = StormdeckApp(StaticFeed(history), executor_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        review = await open_review(app, pilot, TARGET)
        finding = app.query_one(FindingTable).selected()
        await confirm_review(app, pilot, review)
    assert state.read_text().strip() == "latency-performance"
    assert len(made) == 1, "one executor from the review to the change"
    console = (list(seen.reviews), list(seen.carried))

    # The CLI: the same finding's plan, through `stormdeck apply --yes`.
    state.write_text("balanced\n")
    seen.reviews.clear()
    seen.carried.clear()
    plan = plan_from_finding(finding, None)
    path = tmp_path / "plan.json"
    plan.save(path)
    assert main(["apply", str(path), "--yes"]) == 0
    assert state.read_text().strip() == "latency-performance"
    cli = (list(seen.reviews), list(seen.carried))

    for reviews, carried in (console, cli):
        ((checks, reviewed_on),) = reviews
        assert checks == CHECKS
        assert carried == [reviewed_on], "carried out on the executor it was reviewed with"
