import pytest

from gspdml.errors import ConfigError
from gspdml.progress import INTERVAL_ENV, Progress, duration, progress_interval


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def lines(capsys):
    return capsys.readouterr().err.splitlines()


def test_lines_are_rate_limited_and_state_count_rate_and_time_left(capsys):
    clock = Clock()
    meter = Progress("embedding 100 images", 100, "images", interval=5.0, clock=clock)
    for _ in range(4):  # 4 s: below the interval, nothing yet
        clock.now += 1.0
        meter.update(5)
    assert lines(capsys) == []
    clock.now += 1.0
    meter.update(5)  # 25 images in 5 s: 5/s, 75 left -> 15 s
    assert lines(capsys) == [
        "gspdml: embedding 100 images: 25/100 images (25%), 5 images/s, 5 s elapsed, ~15 s left"
    ]
    clock.now += 2.0
    meter.update(25)  # 2 s after the last line: quiet
    assert lines(capsys) == []
    clock.now += 3.0
    meter.update(10, note="loss 0.500")  # 35 images in the 5 s since the last line: 7/s
    assert lines(capsys) == [
        "gspdml: embedding 100 images: 60/100 images (60%), 7 images/s, 10 s elapsed, ~6 s left, loss 0.500"
    ]
    clock.now += 190.0  # 200 s in all
    meter.update(40)
    meter.close()
    assert lines(capsys) == [
        "gspdml: embedding 100 images: 100/100 images (100%), 0.211 images/s, 3 min elapsed",
        "gspdml: embedding 100 images: 100/100 images (100%), done in 3 min",
    ]


def test_a_short_phase_or_a_disabled_one_prints_nothing(capsys):
    clock = Clock()
    with Progress("quick", 10, clock=clock, interval=5.0) as meter:
        clock.now += 4.9
        meter.update(10)
    clock.now += 100.0
    off = Progress("off", 10, clock=clock, interval=0.0, enabled=False)
    off.update(10)
    off.close()
    assert lines(capsys) == []


def test_an_unknown_total_counts_without_percentage(capsys):
    clock = Clock()
    meter = Progress("feature cache", unit="maps", interval=0.0, clock=clock)
    clock.now += 2.0
    meter.update(64)
    assert lines(capsys) == ["gspdml: feature cache: 64 maps, 32 maps/s, 2 s elapsed"]


def test_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert progress_interval() == 5.0
    monkeypatch.setenv(INTERVAL_ENV, "0")
    assert progress_interval() == 0.0 and Progress("x").interval == 0.0
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(ConfigError, match=INTERVAL_ENV):
            progress_interval()


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0.4, 119, 121, 7199, 9000)] == [
        "0 s",
        "119 s",
        "2 min",
        "120 min",
        "2.5 h",
    ]
