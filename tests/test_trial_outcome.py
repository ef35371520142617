"""A trial's typed outcome: node 0's trial record or a peer's NodeDone, and the summary each gives its sweeper."""

from __future__ import annotations

from ddpbench.sweep.progress import succeeded
from ddpbench.trial.summary import NODE_DONE, NodeDone, TrialRecord
from helpers.trials import make_trial


def test_a_trial_record_summarises_its_record_and_says_when_it_was_resumed() -> None:
    trial = make_trial()
    written, resumed = TrialRecord(trial), TrialRecord(trial, resumed=True)
    assert written.ok and written.summary()["resumed"] is None and resumed.summary()["resumed"] is True
    assert written.summary()["mode"] == trial["mode"] and succeeded(written.summary())
    failed = TrialRecord({**trial, "status": "failed", "error": "node 1 exited with 1"})
    assert not failed.ok and not succeeded(failed.summary()) and failed.summary()["error"] == "node 1 exited with 1"


def test_a_peer_node_reports_node_done_and_whether_its_agents_succeeded() -> None:
    done = NodeDone([1], "traceml", 2, node_ok=True, wall_s=3.5)
    assert done.summary() == {"status": NODE_DONE, "node_rank": [1], "mode": "traceml", "repeat": 2, "node_ok": True,
                              "wall_s": 3.5, "error": None}
    assert succeeded(done.summary())
    assert not succeeded(NodeDone([1], "traceml", 2, node_ok=False, error="peers left").summary())
