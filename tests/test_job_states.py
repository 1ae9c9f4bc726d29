"""A batch job's life cycle: one table (checkpoint.JobState), read from the files beside the output."""

import re
from pathlib import Path

import pytest

from taskflow.checkpoint import CHECKPOINT, PARTIAL, JobState, job_state

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("files, state", [
    ((), JobState.FRESH),
    ((CHECKPOINT,), JobState.STOPPED),
    ((CHECKPOINT, PARTIAL), JobState.STOPPED),
    (("", CHECKPOINT, PARTIAL), JobState.STOPPED),
    (("", CHECKPOINT), JobState.FINISHING),
    (("",), JobState.FINISHED),
    (("", PARTIAL), JobState.FINISHED),     # a .partial of an older run, no checkpoint: nothing to resume
])
def test_the_state_is_read_from_the_files_beside_the_output(tmp_path, files, state):
    output = tmp_path / "out.jsonl"
    for suffix in files:
        (tmp_path / f"out.jsonl{suffix}").write_text("")
    assert job_state(output) is state


def test_architecture_documents_every_state_and_no_other():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table = text[text.index("| state | files |"):].split("\n\n")[0]
    documented = [re.match(r"\| ([^|]+?) \|", line).group(1) for line in table.splitlines()[2:]]
    assert documented == [state.value for state in JobState]
