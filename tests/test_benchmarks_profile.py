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


@pytest.mark.parametrize("text, key", [
    ("Intel(R) Xeon(R) Processor (avx2 fma avx512f avx512_vnni avx512_bf16 avx_vnni amx_bf16 amx_int8)", "intel_amx"),
    ("AMD EPYC (avx2 fma avx512f avx512_vnni avx512_bf16)", "amd_avx512"),
    ("AMD EPYC 7B13 (avx2 fma)", "amd_avx2"),
    ("Intel(R) Core(TM) i5 (no AVX2)", "intel_novec"),
])
def test_each_kind_of_cpu_has_its_own_profile_section(benchmark_script, text, key):
    """oneDNN and MKL pick kernels by vendor and vector unit: a run on another kind of CPU adds a
    section instead of replacing the last one's figures."""
    common = benchmark_script("common")
    assert common.cpu_kind(text)[0] == key
