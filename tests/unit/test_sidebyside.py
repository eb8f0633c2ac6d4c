"""Which due job of a pass may start beside the runs in flight (crontabber.sidebyside)."""

from __future__ import annotations

from types import SimpleNamespace

from crontabber.sidebyside import next_to_start, runs_alone


def job(name: str, *parents: str, parallel: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        app_name=name, depends_on=parents, cls=type(name, (), {"parallel": parallel})
    )


def names(found) -> str | None:
    return found.app_name if found is not None else None


def test_jobs_start_in_order_up_to_the_cap():
    waiting = [job("a"), job("b"), job("c")]
    assert names(next_to_start(waiting, [], False, 2)) == "a"
    assert names(next_to_start(waiting[1:], ["a"], False, 2)) == "b"
    assert next_to_start(waiting[2:], ["a", "b"], False, 2) is None


def test_a_job_waits_for_its_parents_running_or_waiting_and_others_pass_it():
    waiting = [job("bar", "foo"), job("foobar", "foo", "bar"), job("other")]
    assert names(next_to_start(waiting, ["foo"], False, 4)) == "other"
    assert names(next_to_start(waiting[:2], [], False, 4)) == "bar"
    assert next_to_start(waiting[1:2], ["bar"], False, 4) is None


def test_a_job_that_runs_alone_waits_for_an_empty_runner_and_nothing_starts_beside_it():
    waiting = [job("alone", parallel=False), job("b")]
    assert names(next_to_start(waiting, ["a"], False, 4)) == "b"  # the others pass it
    assert next_to_start(waiting[:1], ["a", "b"], False, 4) is None
    assert names(next_to_start(waiting, [], False, 4)) == "alone"
    assert next_to_start(waiting[1:], ["alone"], True, 4) is None


def test_a_class_without_the_attribute_runs_beside_others():
    assert not runs_alone(SimpleNamespace(cls=type("Old", (), {})))
    assert runs_alone(job("x", parallel=False))
