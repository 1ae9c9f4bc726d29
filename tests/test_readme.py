"""Every ``>>>`` example in README.md and the task READMEs runs against the bundled models and
prints what the README shows (floats to the digits shown, then ``...``)."""

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
READMES = [ROOT / "README.md", *sorted((ROOT / "tasks").glob("*/README.md"))]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _examples(path: Path) -> str:
    """The README's ```python blocks, one after another (a block's end ends its last output)."""
    return "\n\n".join(_PYTHON_BLOCK.findall(path.read_text(encoding="utf-8")))


@pytest.mark.slow
@pytest.mark.parametrize("path", READMES, ids=[str(p.relative_to(ROOT)) for p in READMES])
def test_readme_examples_print_what_they_show(path):
    test = doctest.DocTestParser().get_doctest(_examples(path), {}, path.name, str(path), 0)
    if not test.examples:
        pytest.skip(f"{path.relative_to(ROOT)} has no >>> examples")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, f"examples in {path.relative_to(ROOT)} print something else"


def test_every_python_block_in_a_readme_is_run():
    for path in READMES:
        for block in _PYTHON_BLOCK.findall(path.read_text(encoding="utf-8")):
            runnable = block.lstrip().startswith(">>> ")
            assert runnable or block.lstrip().startswith("# not run by the tests: "), (
                f"{path.relative_to(ROOT)} has a Python block the suite does not run and does not say why:\n{block}")
