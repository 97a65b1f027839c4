"""The collector's pause across threads: on while any pause holds it, restored by the last."""

from __future__ import annotations

import gc
import threading

from stormdeck.base.gcpause import gc_paused


def _hold(entered: threading.Event, leave: threading.Event) -> threading.Thread:
    def run() -> None:
        with gc_paused():
            entered.set()
            leave.wait(5)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_overlapping_pauses_in_two_threads_leave_it_on_whichever_ends_first() -> None:
    assert gc.isenabled()
    for first_out in (0, 1):
        entered = [threading.Event(), threading.Event()]
        leave = [threading.Event(), threading.Event()]
        a = _hold(entered[0], leave[0])
        assert entered[0].wait(5)
        b = _hold(entered[1], leave[1])  # enters while the first holds it off
        assert entered[1].wait(5)
        assert not gc.isenabled()
        leave[first_out].set()
        (a, b)[first_out].join(5)
        assert not gc.isenabled()  # the other still holds it
        leave[1 - first_out].set()
        (a, b)[1 - first_out].join(5)
        assert gc.isenabled()


def test_many_threads_at_once_leave_it_on() -> None:
    def churn() -> None:
        for _ in range(2000):
            with gc_paused():
                pass
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert gc.isenabled()


def test_a_process_that_had_it_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with gc_paused(), gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
