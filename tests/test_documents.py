"""benchmarks/documents.py: the figures tables of README.md and the task documents are what the
figures JSON beside benchmarks/RESULTS.md says, and that JSON is what RESULTS.md says (a table
edited by hand, or a benchmark re-run without regenerating the documents, fails here).  Also the
one parser under both, and the errors of a reference to a figure that is not there.  Reads only
committed files; no Paddle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def documents(benchmark_script):
    return benchmark_script("documents")


@pytest.fixture(scope="module")
def common(documents):
    import sys

    return sys.modules["common"]  # the module documents.py reads RESULTS.md with


def test_the_documents_show_the_figures_they_are_generated_from(documents):
    changed = documents.differences()
    diffs = "".join(documents.unified_diff(name, old, new) for name, (old, new) in changed.items())
    assert not changed, f"figures tables differ from benchmarks/figures/ (run python benchmarks/documents.py):\n{diffs}"


def test_the_readme_and_the_cards_hold_generated_tables(documents):
    names = documents.documents()
    assert "README.md" in names
    assert {"tasks/sentiment_analysis/README.md", "tasks/text_similarity/README.md", "tasks/lexical_analysis/README.md",
            "tasks/ner/README.md", "tasks/knowledge_mining/README.md", "tasks/reading_comprehension/README.md"} <= set(names)


def test_the_figures_json_is_what_results_md_says(documents, common):
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    sections = common.sections(text)
    assert sections
    for name, body in sections.items():
        path = documents.FIGURES_DIR / f"{name}.json"
        assert path.is_file(), f"{path} is missing (python benchmarks/documents.py --from-results)"
        want = common.figures_json(common.section_figures(name, body))
        assert path.read_text(encoding="utf-8") == want, f"{path} differs from RESULTS.md's section {name!r}"


BODY = """## lexical: speed

Machine: Intel(R) Xeon(R) Processor @ 2.80GHz (avx2 fma), 2 cores, Python 3.11.7, paddlepaddle 3.3.1, 2026-12-01; \
1-minute load average at start 0.2. Command: `python benchmarks/bench_x.py --data ../shared/data`.

### 分词 (MSRA dev)

{first}

Between the tables.

### By batch

{second}

Model at batch 64 / jieba: **1.26x**."""


def test_a_results_section_round_trips_through_its_json(tmp_path, documents, common):
    first = common.table(["segmenter", "chars/s", "F1"], [["taskflow, batch 1", "10,360 (9,994-11,170)", "**0.9717**"],
                                                         ["jieba.cut", "175,373", "0.8041"]])
    second = common.table(["batch", "static", "dynamic"], [[1, 191, ""], [32, "780", 281]])
    body = BODY.format(first=first, second=second)
    results = tmp_path / "RESULTS.md"
    common.update_section("lexical_speed", body, path=results)

    written = (tmp_path / "figures" / "lexical_speed.json").read_text(encoding="utf-8")
    assert written.endswith("}\n") and "分词" in written  # UTF-8 as it is, not \\u escapes
    figures = json.loads(written)
    assert list(figures) == ["section", "preamble", "tables"]
    assert figures["section"] == "lexical_speed"
    assert figures["preamble"] == body[:body.index("| segmenter")].strip()  # all the text before the first table
    assert figures["tables"] == [
        {"heading": "分词 (MSRA dev)", "columns": ["segmenter", "chars/s", "F1"],
         "rows": [["taskflow, batch 1", "10,360 (9,994-11,170)", "**0.9717**"], ["jieba.cut", "175,373", "0.8041"]]},
        {"heading": "By batch", "columns": ["batch", "static", "dynamic"], "rows": [["1", "191", ""], ["32", "780", "281"]]},
    ]
    # The bootstrap reads RESULTS.md with the same parser and writes the same bytes.
    again = documents.from_results(results, tmp_path / "again")
    assert [p.name for p in again] == ["lexical_speed.json"]
    assert again[0].read_text(encoding="utf-8") == written

    assert documents.measured(figures["preamble"]) == (
        "Intel(R) Xeon(R) Processor @ 2.80GHz (avx2 fma), 2 cores, Python 3.11.7, paddlepaddle 3.3.1",
        "2026-12-01", "python benchmarks/bench_x.py --data ../shared/data")


@pytest.mark.parametrize("preamble, want", [
    ("Written by `python benchmarks/bench_serve.py --data DIR` on AMD EPYC (avx2 fma), 2 cores, Python 3.11.7, "
     "paddlepaddle 3.3.1, 2026-12-02; 1-minute load average at start 0.5.",
     ("AMD EPYC (avx2 fma), 2 cores, Python 3.11.7, paddlepaddle 3.3.1", "2026-12-02",
      "python benchmarks/bench_serve.py --data DIR")),
    ("`python benchmarks/bench_calls.py --data x` (x86_64 (CPU model not recorded), 2 cores, Python 3.11.7, "
     "paddlepaddle 3.3.1, 2026-11-22; 1-minute load average at start 0.5): texts/s:",
     ("x86_64 (CPU model not recorded), 2 cores, Python 3.11.7, paddlepaddle 3.3.1", "2026-11-22",
      "python benchmarks/bench_calls.py --data x")),
    ("Entity F1 on a dev set (701 sentences). Command: `python benchmarks/accuracy_lexical_genre.py`.",
     (None, None, "python benchmarks/accuracy_lexical_genre.py")),
])
def test_machine_date_and_command_are_read_from_the_paragraph(documents, preamble, want):
    assert documents.measured(preamble) == want


@pytest.fixture
def one_section(tmp_path, common):
    body = "## s\n\nMachine: AMD EPYC (avx2 fma), 2 cores, Python 3.11.7, paddlepaddle 3.3.1, 2026-11-29. " \
           "Command: `python benchmarks/s.py`.\n\n" + common.table(["split", "fast", "accurate"], [
               ["BQ test", "0.7992", "**0.8049**"], ["LCQMC test", "0.7590", "**0.7690**"]])
    common.write_figures(common.section_figures("s", body), tmp_path / "figures")
    return tmp_path / "figures"


def test_a_block_renders_its_cells_and_the_measured_line(documents, one_section):
    ref = documents.table_of("s")
    block = documents.Block("doc.md", "t", ("split", "fast", "accurate", "accurate / fast"), (
        ("BQ", ref("BQ test", "fast", decimals=3), ref("BQ test", "accurate"),
         documents.Ratio(ref("BQ test", "accurate"), ref("BQ test", "fast"), decimals=3)),
        ("both", documents.Span((ref("BQ test", "fast"), ref("LCQMC test", "fast")), decimals=2),
         ("**", ref("LCQMC test", "accurate", bold=False), "**"), ""),
    ))
    assert documents.render_block(block, documents.Figures(one_section)).splitlines() == [
        "| split | fast | accurate | accurate / fast |",
        "|---|---|---|---|",
        "| BQ | 0.799 | **0.8049** | 1.007x |",
        "| both | 0.76-0.80 | **0.7690** |  |",
        "",
        "Measured: AMD EPYC (avx2 fma), 2 cores, Python 3.11.7, paddlepaddle 3.3.1, 2026-11-29; `python benchmarks/s.py`.",
    ]


@pytest.mark.parametrize("ref, named", [
    (("nope", 0, "BQ test", "fast"), ["'nope'", "nope.json"]),
    (("s", 1, "BQ test", "fast"), ["'s'", "no table #1"]),
    (("s", "Speed", "BQ test", "fast"), ["'s'", "'Speed'"]),
    (("s", 0, "AFQMC dev", "fast"), ["'s'", "'AFQMC dev'", "BQ test"]),
    (("s", 0, "BQ test", "TF-IDF + LR"), ["'s'", "'TF-IDF + LR'", "accurate"]),
])
def test_a_reference_to_a_missing_figure_is_an_error_naming_it(documents, one_section, ref, named):
    block = documents.Block("doc.md", "t", ("x",), ((documents.Ref(*ref),),))
    with pytest.raises(documents.FigureError) as error:
        documents.render_block(block, documents.Figures(one_section))
    for part in named:
        assert part in str(error.value)


def test_a_cell_that_is_not_the_number_its_format_asks_for_is_an_error(documents, one_section):
    block = documents.Block("doc.md", "t", ("x",), ((documents.Ref("s", 0, "BQ test", "split", decimals=2),),))
    with pytest.raises(documents.FigureError, match="'BQ test' is not a number"):
        documents.render_block(block, documents.Figures(one_section))


def test_check_reports_a_stale_table_and_writing_fixes_it(tmp_path, documents, one_section):
    block = documents.Block("README.md", "t", ("split", "fast"), (("BQ", documents.Ref("s", 0, "BQ test", "fast")),))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- BEGIN figures:t -->\n| split | fast |\n|---|---|\n| BQ | 0.7000 |\n"
                      "<!-- END figures:t -->\n\nAfter.\n", encoding="utf-8")
    changed = documents.differences(tmp_path, one_section, [block])
    assert list(changed) == ["README.md"]
    diff = documents.unified_diff("README.md", *changed["README.md"])
    assert "-| BQ | 0.7000 |" in diff and "+| BQ | 0.7992 |" in diff
    readme.write_text(changed["README.md"][1], encoding="utf-8")
    assert documents.differences(tmp_path, one_section, [block]) == {}
    assert readme.read_text(encoding="utf-8").endswith("<!-- END figures:t -->\n\nAfter.\n")


def test_markers_without_a_spec_entry_or_a_spec_entry_without_markers_are_errors(tmp_path, documents, one_section):
    (tmp_path / "README.md").write_text("<!-- BEGIN figures:other -->\n<!-- END figures:other -->\n", encoding="utf-8")
    block = documents.Block("README.md", "t", ("split",), (("BQ",),))
    with pytest.raises(documents.FigureError, match="other"):
        documents.differences(tmp_path, one_section, [block])
    (tmp_path / "README.md").write_text("no markers\n", encoding="utf-8")
    with pytest.raises(documents.FigureError, match="figures:NAME"):
        documents.differences(tmp_path, one_section, [block])
