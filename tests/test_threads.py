"""One Taskflow instance shared by many threads gives the serial results."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from taskflow import Taskflow

TEXTS = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "一般般吧", "非常满意！" * 20, "差"]


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_8_threads_x_200_calls_equal_serial_results(tiny_sentiment, static):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, static=static)
    calls = [[TEXTS[i % len(TEXTS)], TEXTS[(i * 3) % len(TEXTS)]] for i in range(8 * 200)]
    serial = {i: flow(c) for i, c in enumerate(calls[:len(TEXTS) * 3])}
    expected = {tuple(c): r for c, r in zip(calls, serial.values())}

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(flow, calls))
    assert len(results) == len(calls)
    for call, result in zip(calls, results):
        assert result == expected[tuple(call)]
