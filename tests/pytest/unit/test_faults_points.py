"""python_hooks/project/faults.py without killing anything: which point is wanted, what arms the kill."""

from __future__ import annotations

from types import SimpleNamespace

from python_hooks.project import faults


def test_wanted_by_point_and_table(monkeypatch):
    monkeypatch.delenv(faults.KILL_AT, raising=False)
    assert not faults.enabled() and not faults.wanted("during_merge", "t")
    monkeypatch.setenv(faults.KILL_AT, "during_merge")
    assert faults.wanted("during_merge", "t") and faults.wanted("during_merge") and not faults.wanted("after_merge")
    monkeypatch.setenv(faults.KILL_AT, "during_merge:crm__customer_master")
    assert faults.wanted("during_merge", "crm__customer_master")
    assert not faults.wanted("during_merge", "crm__customer_address")


def test_the_macro_line_arms_the_kill_and_nothing_else_does(monkeypatch):
    armed = []
    monkeypatch.setattr(faults, "arm", armed.append)
    for message in ("cdc: pause point before_publish of x reached", "", None):
        faults.dbt_callback(SimpleNamespace(data=SimpleNamespace(msg=message)))
    faults.dbt_callback(SimpleNamespace(data=SimpleNamespace()))
    assert armed == []
    faults.dbt_callback(SimpleNamespace(data=SimpleNamespace(msg="cdc: kill point after_publish of `s`.`t` reached")))
    assert armed == ["after_publish"]


def test_a_during_point_kills_later_from_a_timer(monkeypatch):
    killed, timers = [], []
    monkeypatch.setattr(faults, "_kill", lambda: killed.append("now"))

    class Timer:
        def __init__(self, delay, function):
            timers.append((delay, function))

        def start(self):
            pass

    monkeypatch.setattr(faults.threading, "Timer", Timer)
    monkeypatch.setenv(faults.KILL_DELAY, "2.5")
    faults.arm("during_insert")
    assert killed == [] and timers[0][0] == 2.5
    faults.arm("after_insert")
    assert killed == ["now"] and len(timers) == 1
