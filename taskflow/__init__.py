"""taskflow: one-line Chinese NLP pipelines on PaddlePaddle.

>>> from taskflow import Taskflow
>>> Taskflow("sentiment_analysis")(["这家酒店很干净，服务也好"])   # doctest: +SKIP
[{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.878...}]
"""

import importlib.abc
import importlib.util
import sys
from pathlib import Path


class _CheckoutFolders(importlib.abc.MetaPathFinder):
    """``taskflow.tasks`` and ``taskflow.resources`` from the folders beside this one.

    setup.cfg maps the repository's ``tasks/`` and ``resources/`` into this namespace, which an
    install (a wheel, or an editable one) carries out.  In a source checkout's root, where
    ``import taskflow`` finds this folder ahead of any install (Python puts the working directory
    first), nothing maps them: this finder does, so the first example works there too.
    """

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package != __name__ or name not in ("tasks", "resources"):
            return None
        folder = self.root / name
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


_here = Path(__file__).resolve().parent
if not (_here / "tasks").exists() and (_here.parent / "tasks" / "__init__.py").is_file():
    sys.meta_path.append(_CheckoutFolders(_here.parent))

from . import errors  # noqa: E402
from .client import Client  # noqa: E402
from .pipeline import Taskflow  # noqa: E402
from .registry import register_task  # noqa: E402
from .task import Task, TextTask  # noqa: E402

__all__ = ["Taskflow", "Client", "Task", "TextTask", "register_task", "errors", "__version__"]
__version__ = "0.1.0"
