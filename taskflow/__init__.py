"""taskflow: one-line Chinese NLP pipelines on PaddlePaddle.

>>> from taskflow import Taskflow
>>> Taskflow("sentiment_analysis")(["这家酒店很干净，服务也好"])   # doctest: +SKIP
[{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.878...}]
"""

from . import errors
from .pipeline import Taskflow
from .registry import register_task
from .task import Task, TextTask

__all__ = ["Taskflow", "Task", "TextTask", "register_task", "errors", "__version__"]
__version__ = "0.1.0"
