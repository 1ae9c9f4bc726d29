"""benchmarks/soak_serve.py's pure helpers: the least-squares slope, what the RSS soak reports from
its samples, and what it reads from /proc, wrk and the server's log.  No server is started here."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def soak(benchmark_script):
    return benchmark_script("soak_serve")


def test_slope_of_points_on_a_line_and_around_it(soak):
    assert soak.least_squares_slope([0, 1, 2, 3], [5, 7, 9, 11]) == pytest.approx(2.0)
    # Off the line: the fit, not the end points ((1 - 0) / 3 would be 0.333).
    assert soak.least_squares_slope([0, 1, 2, 3], [0, 2, 0, 1]) == pytest.approx(0.1)
    assert soak.least_squares_slope([10, 20], [3, 3]) == 0.0
    with pytest.raises(ValueError):
        soak.least_squares_slope([1], [1])
    with pytest.raises(ValueError):
        soak.least_squares_slope([2, 2], [1, 3])


def test_rss_summary_measures_from_the_warm_up_sample(soak):
    samples = [(0, 300.0), (5000, 340.0), (10000, 342.0), (15000, 346.0), (20000, 343.0)]
    s = soak.rss_summary(samples, warm_up=5000, bound_mb=10)
    assert (s["first_mb"], s["warm_requests"], s["warm_mb"], s["last_mb"]) == (300.0, 5000, 340.0, 343.0)
    assert s["growth_mb"] == pytest.approx(3.0)
    assert s["growth_per_10k_mb"] == pytest.approx(2.0)          # 3 MiB over 15,000 requests
    assert s["slope_per_10k_mb"] == pytest.approx(soak.least_squares_slope([5000, 10000, 15000, 20000],
                                                                           [340, 342, 346, 343]) * 10000)
    assert s["peak_rise_mb"] == pytest.approx(6.0)               # the highest sample, not the last
    assert s["within_bound"] is True
    assert soak.rss_summary(samples, warm_up=5000, bound_mb=5)["within_bound"] is False


def test_rss_summary_takes_the_first_sample_past_the_warm_up(soak):
    s = soak.rss_summary([(0, 100.0), (4990, 120.0), (5004, 121.0), (9000, 125.0)], warm_up=5000, bound_mb=10)
    assert (s["warm_requests"], s["warm_mb"]) == (5004, 121.0)


def test_rss_summary_without_samples_after_warm_up(soak):
    s = soak.rss_summary([(0, 100.0), (1000, 110.0)], warm_up=5000, bound_mb=10)
    assert s["warm_mb"] is None and s["slope_per_10k_mb"] is None and s["within_bound"] is None
    s = soak.rss_summary([(0, 100.0), (5000, 110.0)], warm_up=5000, bound_mb=10)
    assert s["growth_mb"] == 0.0 and s["slope_per_10k_mb"] is None and s["within_bound"] is None


def test_vm_rss_from_proc_status(soak):
    text = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  420000 kB\nVmRSS:\t  412345 kB\nThreads:\t9\n"
    assert soak.vm_rss_kb(text) == 412345
    with pytest.raises(ValueError):
        soak.vm_rss_kb("Name:\tzombie\nState:\tZ (zombie)\n")


def test_wrk_result_line(soak):
    out = "Running 1h test @ http://127.0.0.1:1\nLIMIT\n  5000 requests in 20.00s\nRESULT 5004 3 20123456\n"
    assert soak.wrk_result(out) == {"requests": 5004, "failed": 3, "seconds": pytest.approx(20.123456)}
    with pytest.raises(ValueError):
        soak.wrk_result("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_access_log_counts_responses_to_the_route_by_status(soak):
    log = "\n".join([
        'INFO:     127.0.0.1:50000 - "GET /ready HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:50001 - "POST /v1/sentiment_analysis HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:50002 - "POST /v1/sentiment_analysis HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:50003 - "POST /v1/sentiment_analysis HTTP/1.1" 503 Service Unavailable',
        'INFO:     127.0.0.1:50004 - "POST /v1/ner HTTP/1.1" 200 OK',
    ])
    assert soak.access_log_statuses(log) == {200: 2, 503: 1}


def test_server_log_signs_of_dropped_requests(soak):
    assert soak.read_server_log("Shutting down\nWaiting for connections to close.\n") == \
        {"cancelled": 0, "app_errors": 0}
    log = ("Cancel 3 running task(s), timeout graceful shutdown exceeded\n"
           "Exception in ASGI application\nTraceback ...\n")
    assert soak.read_server_log(log) == {"cancelled": 1, "app_errors": 1}


def test_window_against_the_sigterm(soak):
    assert soak.window(1.0, 2.0, None) == "before SIGTERM"
    assert soak.window(1.0, 2.0, 3.0) == "before SIGTERM"
    assert soak.window(1.0, 4.0, 3.0) == "in flight at SIGTERM"
    assert soak.window(3.5, 4.0, 3.0) == "after SIGTERM"
