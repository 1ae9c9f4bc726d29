"""benchmarks/profile_lexical.py's reading of Paddle Inference's profiling report: the top-level
op rows of each "Event Summary", summed over the reports of several predictors, without the
indented infermeta rows or the per-thread copies.  No predictor is run here."""

from __future__ import annotations

import pytest

REPORT = """
------------------------->     Profiling Report     <-------------------------

-------------------------       Event Summary       -------------------------

Event                                  Calls       Total       Min.        Max.        Ave.        Ratio.
pd_op.rnn_                             4           751.082     7.09042     581.595     187.771     0.929658
  PhiKernelInstruction::infermeta      4           0.04072     0.00686     0.012198    0.01018     5.04015e-05
onednn_op.transpose                    6           12.224      0.467596    4.39024     2.03733     0.0151303
thread0::pd_op.rnn_                    4           751.082     7.09042     581.595     187.771     0.929658

-------------------------       Event Summary       -------------------------

Event                                  Calls       Total       Min.        Max.        Ave.        Ratio.
pd_op.rnn_                             1           20.5        20.5        20.5        20.5        0.9
pd_op.crf_decoding                     1           2.0         2.0         2.0         2.0         0.1
"""


@pytest.fixture(scope="module")
def profile(benchmark_script):
    return benchmark_script("profile_lexical")


def test_report_rows_are_summed_over_predictors(profile):
    rows = profile.parse_report(REPORT)
    assert [r["op"] for r in rows] == ["pd_op.rnn_", "onednn_op.transpose", "pd_op.crf_decoding"]
    assert rows[0]["calls"] == 5 and rows[0]["ms"] == pytest.approx(771.582)
    assert rows[2] == {"op": "pd_op.crf_decoding", "calls": 1, "ms": 2.0}


def test_no_report_reads_as_no_rows(profile):
    assert profile.parse_report("W1202 some warning\nno profile here\n") == []
