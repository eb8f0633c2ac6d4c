"""crontabber.frozen: the records an idle tick builds behave as the frozen dataclasses they
replaced (repr, equality, hash, no assignment, pickling, replace)."""

from __future__ import annotations

import copy
import datetime as dt
import pickle
from pathlib import Path
from typing import ClassVar

import pytest

from crontabber.config.database import DatabaseSettings
from crontabber.config.settings import MonitorSettings, load_settings
from crontabber.frozen import Frozen, FrozenError
from crontabber.scheduling import Schedule, TimeOfDay
from crontabber.state import FinishRecord, JobState, RunKind

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)


def test_a_record_has_a_dataclass_repr_and_compares_and_hashes_by_fields():
    assert repr(TimeOfDay(6, 5)) == "TimeOfDay(hour=6, minute=5)"
    assert TimeOfDay(6, 5) == TimeOfDay(6, 5) and TimeOfDay(6, 5) != TimeOfDay(6, 6)
    assert hash(TimeOfDay(6, 5)) == hash(TimeOfDay(6, 5))
    assert TimeOfDay(6, 5) != (6, 5)  # not a tuple
    assert JobState("a").last_error == {} and JobState("a") == JobState("a", last_error={})


def test_a_record_refuses_assignment_and_deletion():
    state = JobState("a")
    with pytest.raises(FrozenError):
        state.error_count = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del state.app_name
    with pytest.raises(AttributeError):
        state.other = 1  # type: ignore[attr-defined]


def test_replace_rebuilds_through_init_and_refuses_unknown_names():
    schedule = Schedule("1d", 86400, TimeOfDay(6, 0))
    later = schedule.replace(lag=dt.timedelta(minutes=7))
    assert later.delay == dt.timedelta(minutes=7) and later.time == schedule.time
    assert schedule.lag == dt.timedelta(0)
    with pytest.raises(TypeError):
        schedule.replace(nope=1)
    with pytest.raises(ValueError):  # DatabaseSettings' own check runs again
        DatabaseSettings(host="a,b").replace(port="1,2,3")


def test_records_pickle_and_copy_by_their_fields():
    record = FinishRecord(NOW, False, {"type": "x"}, None, RunKind.RERUN, stopped=True)
    assert pickle.loads(pickle.dumps(record)) == record
    assert copy.copy(record) == record and copy.deepcopy(record) == record


def test_secrets_stay_out_of_reprs():
    database = DatabaseSettings(user="u", password="hunter2")
    assert "hunter2" not in repr(database)
    assert repr(database) == "DatabaseSettings(u@localhost:5432/crontabber)"
    settings = load_settings(
        str(REPO / "crontabber.ini"), {}, {"SENTRY_DSN": "https://publickey@sentry.example/1"}
    )
    assert settings.sentry_dsn and "publickey" not in repr(settings)
    assert "sources=" not in repr(settings) and "database=DatabaseSettings(" in repr(settings)
    assert settings == settings.replace(sources=None)  # the sources are not compared


def test_run_kinds_are_distinct():
    """RunKind was decorated as a dataclass: every kind compared equal to every other."""
    assert RunKind.SCHEDULED != RunKind.RERUN and repr(RunKind.RERUN) == "<RunKind.RERUN: 'rerun'>"
    assert FinishRecord(NOW, True, {}, None, RunKind.RERUN) != FinishRecord(NOW, True, {}, None)


def test_a_default_is_kept_when_not_given():
    monitor = MonitorSettings(1.0, 2.0, 3.0, 4.0, "")
    assert monitor.paused_warning_percent == 100.0


class _Point(Frozen):
    x: int
    y: int = 0
    unit: ClassVar[str] = "px"  # not a field


class _Labelled(_Point):
    label: str = ""


def test_a_field_is_declared_once_as_an_annotation():
    assert _Point._fields == ("x", "y") and _Point.__slots__ == ("x", "y")
    assert _Labelled._fields == ("x", "y", "label")  # the base's first, as a dataclass
    assert _Point(1) == _Point(x=1, y=0) and _Point(1, 2).y == 2
    assert _Labelled(1, label="a") == _Labelled(1, 0, "a") and _Point.unit == "px"
    assert repr(_Labelled(1, 2, "a")) == "_Labelled(x=1, y=2, label='a')"
    assert pickle.loads(pickle.dumps(_Labelled(3, label="b"))) == _Labelled(3, 0, "b")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing field 'x'"),
        ((1, 2, 3), {}, "takes 2 fields, 3 given"),
        ((1,), {"x": 2}, "field 'x' twice"),
        ((1,), {"z": 2}, "no field 'z'"),
    ],
)
def test_a_record_refuses_wrong_arguments_by_name(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        _Point(*args, **kwargs)
