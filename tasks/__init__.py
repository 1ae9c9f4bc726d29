"""Built-in tasks, one sub-package each (imported as ``taskflow.tasks``).

Importing this package registers every built-in task.  Task packages keep
Paddle out of their import path (the network lives in ``model.py``, imported
only when a model is built), so this stays cheap.
"""

from . import sentiment_analysis  # noqa: F401
from . import lexical_analysis  # noqa: F401  (also word_segmentation, pos_tagging, ner)
from . import text_similarity  # noqa: F401  (alias text_matching)
from . import knowledge_mining  # noqa: F401  (alias wordtag; also ner's accurate mode)
from . import reading_comprehension  # noqa: F401  (alias question_answering_extractive)
