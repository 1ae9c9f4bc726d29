"""ner: named entities with character offsets, in two modes over two models.

* ``mode="fast"`` (default) runs the lexical model (``lexical_analysis/bigru_crf``):
  LAC's PER / LOC / ORG / TIME; or, with ``task_path=``, a tagger for your own entity
  types trained by ``taskflow train ner --train FILE`` (``train.py``).
* ``mode="accurate"`` runs the knowledge_mining model (term tree and category
  classifier over the same lexical network): WordTag categories (人物类_实体,
  组织机构类...), ``entity_only=True`` by default.

Both give the same shape, ``{'text', 'entities': [{'text', 'label', 'start', 'end'}],
'words': [(word, label)]}``, with ``text[start:end] == entity['text']`` (``end`` exclusive).

>>> from taskflow import Taskflow
>>> Taskflow("ner")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
[{'text': '李明昨天在北京大学见到了王芳',
  'entities': [{'text': '李明', 'label': 'PER', 'start': 0, 'end': 2},
               {'text': '昨天', 'label': 'TIME', 'start': 2, 'end': 4},
               {'text': '北京大学', 'label': 'ORG', 'start': 5, 'end': 9},
               {'text': '王芳', 'label': 'PER', 'start': 12, 'end': 14}],
  'words': [('李明', 'PER'), ('昨天', 'TIME'), ('在', 'p'), ('北京大学', 'ORG'),
            ('见到', 'v'), ('了', 'u'), ('王芳', 'PER')]}]
"""

from __future__ import annotations

from typing import Any, Iterable

from taskflow.errors import OptionError
from taskflow.registry import register_task
from taskflow.task import Option, bool_option
from taskflow.tasks.knowledge_mining import CATEGORIES, ENTITY_CATEGORIES, KnowledgeMiningTask
from taskflow.tasks.lexical_analysis import LexicalAnalysisTask

__all__ = ["NERTask", "AccurateNERTask", "ENTITY_LABELS"]

ENTITY_LABELS = ("PER", "LOC", "ORG", "TIME")


class EntityOutput:
    """What both modes share: the ``entity_labels`` / ``entity_only`` options and the output shape."""

    entity_labels: frozenset
    entity_only: bool

    def set_entity_options(self, entity_labels: Iterable[str] | None, entity_only: Any, default: Iterable[str],
                           known: list[str], example: str) -> None:
        self.entity_only = bool_option("entity_only", entity_only)
        if entity_labels is None:
            self.entity_labels = frozenset(default)
            return
        if isinstance(entity_labels, str) or not all(isinstance(x, str) for x in entity_labels):
            raise OptionError(f"entity_labels must be a list of {example}, got {entity_labels!r}", "entity_labels")
        entity_labels = tuple(entity_labels)
        unknown = sorted(set(entity_labels) - set(known))
        if unknown or not entity_labels:
            import difflib

            # The entity labels are the choices worth listing; any other tag of the model (a POS tag)
            # is accepted too, but naming all of them buries the answer.
            default = list(default)
            close = [difflib.get_close_matches(label, default, n=1, cutoff=0.5) or
                     difflib.get_close_matches(label.upper(), default, n=1, cutoff=0.5) for label in unknown]
            hint = "".join(f" Did you mean {c[0]!r} for {label!r}?" for label, c in zip(unknown, close) if c)
            other = next((tag for tag in known if tag not in default), None)
            also = f" (any other tag the model gives, e.g. {other!r}, is accepted too)" if other else ""
            raise OptionError(
                f"entity_labels has {', '.join(map(repr, unknown)) or 'no labels'}.{hint} Entity labels: "
                f"{', '.join(default)}{also}", "entity_labels")
        self.entity_labels = frozenset(entity_labels)

    def entity_result(self, text: str, words: Iterable[tuple[int, int, str]]) -> dict:
        """ner's output for ``(start, end, label)`` words."""
        words = list(words)
        entities = [{"text": text[s:e], "label": t, "start": s, "end": e} for s, e, t in words
                    if t in self.entity_labels]
        pairs = [(text[s:e], t) for s, e, t in words if not self.entity_only or t in self.entity_labels]
        return {"text": text, "entities": entities, "words": pairs}

    def render_html(self, results, items):
        from taskflow.display import html_spans

        labels: list[str] = []
        return "".join(
            html_spans(r["text"], [(e["start"], e["end"], e["label"]) for e in r["entities"]], labels) for r in results
        )


@register_task("ner", aliases=["named_entity_recognition"])
class NERTask(EntityOutput, LexicalAnalysisTask):
    """Named entities with character offsets, plus the ``(word, tag)`` list (mode ``fast``).

    Options (on top of ``user_dict`` / ``user_dict_format``):
        entity_labels: which tags count as entities (default PER, LOC, ORG,
            TIME, or the types of a model trained by ``taskflow train ner``, and the
            user dictionary's own labels, e.g. MOVIE in 长津湖/MOVIE).
        entity_only: keep only entity words in ``words``.

    ``mode="accurate"`` gives WordTag categories instead; see :class:`AccurateNERTask`.
    """

    declared = {
        "entity_labels": Option(
            None,
            'which tags count as entities (default PER, LOC, ORG, TIME, or the types of a model trained by '
            "``taskflow train ner``, and the user dictionary's own labels, e.g. MOVIE in 长津湖/MOVIE).",
            "list"),
        "entity_only": Option(
            False,
            'keep only entity words in ``words``.',
            "bool", per_call=True, check=bool_option),
    }

    default_model = "lexical_analysis/bigru_crf"
    modes = {"fast": "lexical_analysis/bigru_crf", "accurate": "knowledge_mining/termtree"}

    @classmethod
    def class_for(cls, package_task):
        # A knowledge_mining package (mode="accurate") labels words with WordTag categories.
        return AccurateNERTask if package_task == "knowledge_mining" else cls

    def __init__(self, model, *, entity_labels: Iterable[str] | None = None, entity_only: bool = False, **base):
        super().__init__(model, **base)
        user_tags = sorted(self.user_dict.tags) if self.user_dict is not None else []
        # A label of the user's own (长津湖/MOVIE) is an entity label; POS tags they reuse (花/n) are not.
        own = [tag for tag in user_tags if tag not in self.tag_set]
        # A package trained by `taskflow train ner` names the user's entity types; the lexical one has LAC's.
        model_entities = list(self.network_model.manifest.get("entity_labels", ENTITY_LABELS))
        self.set_entity_options(entity_labels, entity_only, [*model_entities, *own],
                                list(dict.fromkeys(self.tag_set + user_tags)),
                                f"tag names such as {model_entities[:2]!r}")

    def format_result(self, text, words):
        return self.entity_result(text, words)


class AccurateNERTask(EntityOutput, KnowledgeMiningTask):
    """``Taskflow("ner", mode="accurate")``: entities with WordTag categories.

    Same output as the fast mode; labels are WordTag categories, and ``user_dict`` is in the
    WordTag format.

    >>> from taskflow import Taskflow
    >>> Taskflow("ner", mode="accurate")("李明在北京大学工作")   # doctest: +SKIP
    [{'text': '李明在北京大学工作',
      'entities': [{'text': '李明', 'label': '人物类_实体', 'start': 0, 'end': 2},
                   {'text': '北京大学', 'label': '组织机构类', 'start': 3, 'end': 7}],
      'words': [('李明', '人物类_实体'), ('北京大学', '组织机构类')]}]
    """

    declared = {
        "entity_labels": Option(
            None,
            'which WordTag categories count as entities (default: ENTITY_CATEGORIES, and the user '
            "dictionary's own categories).",
            "list"),
        "entity_only": Option(
            True,
            'keep only entity words in ``words`` (default True).',
            "bool", per_call=True, check=bool_option),
    }

    name = "ner"   # registered through NERTask.class_for

    def __init__(self, model, *, entity_labels: Iterable[str] | None = None, entity_only: bool = True,
                 user_dict: Any = None, user_dict_format: str = "auto", **base):
        super().__init__(model, user_dict=user_dict, user_dict_format=user_dict_format, **base)
        own = sorted(self.user_dict.tags - set(CATEGORIES)) if self.user_dict is not None else []
        # A category of the user's own (长津湖/电影类_实体) is an entity label, as in PaddleNLP's example.
        self.set_entity_options(entity_labels, entity_only, [*ENTITY_CATEGORIES, *own], list(CATEGORIES) + own,
                                "categories such as ['人物类_实体', '组织机构类']")

    def format_result(self, text, items):
        return self.entity_result(text, [(s, e, label) for s, e, label, _ in items])
