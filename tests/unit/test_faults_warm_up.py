"""The search load's warm-up rule (faults.search_load.plateaued): the levels start once
the throughput has stopped rising, not after a fixed time."""

from faults.search_load import plateaued


def test_a_rising_throughput_is_not_a_plateau():
    assert not plateaued([87, 154, 198, 223, 240, 290])


def test_two_windows_within_five_percent_of_the_best_before_are_a_plateau():
    # the 12-s windows measured right after an Elasticsearch restart (requests/s)
    windows = [87, 154, 198, 223, 212, 239, 286, 348, 367, 376, 453, 498, 513, 529]
    stops = [n for n in range(1, len(windows) + 1) if plateaued(windows[:n])]
    assert stops[0] == len(windows)  # one window within 5% does not stop it (212, then 239)


def test_a_window_above_the_best_by_more_than_five_percent_restarts_the_count():
    assert plateaued([100, 200, 205, 209])
    assert not plateaued([100, 200, 205, 216])  # 216 > 1.05 * 205


def test_too_few_windows_are_no_plateau():
    assert not plateaued([])
    assert not plateaued([100, 100])
