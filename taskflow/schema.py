"""The manifest's fields: what each is, its JSON type, and who reads it.

Every top-level field of a ``manifest.json`` is named here; :func:`check_fields` refuses one that
is not, naming the closest known field, so a package with ``"temprature"`` fails when it is loaded
instead of running uncalibrated.  The table is also the field reference of ARCHITECTURE.md.
Nested objects (``architecture``, ``training``, the ``*_tuning`` records) are checked by their
readers; the records a recipe keeps for people (``metrics``, ``training``, ``*_tuning``...) are
never read by the product.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ManifestError

__all__ = ["Field", "FIELDS", "check_fields"]

_JSON_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "object": Mapping}


@dataclass(frozen=True)
class Field:
    kind: str           # the JSON type: str, int, float (a number), bool, list, object
    read_by: str        # the module that reads it ("record": kept for people, read by none)
    help: str


FIELDS: dict[str, Field] = {
    # identity and files: packages.py
    "task": Field("str", "packages", "the task folder the package belongs to"),
    "name": Field("str", "packages", "the model's name, as Taskflow(model=...) takes it"),
    "version": Field("str", "packages", "its version; the cache keeps each version apart"),
    "files": Field("object", "packages", "file name -> {sha256, size}: every file the package pins"),
    "requires": Field("object", "model", "role -> 'task/model' or './folder': packages this one runs with"),
    "description": Field("str", "record", "one line for people"),
    # the network: model.py, predictor.py
    "architecture": Field("object", "model", "the network: its registered type and hyper-parameters"),
    "normalization": Field("list", "model", "the text normalisation steps, in order (text.py)"),
    "onednn": Field("bool", "predictor", "False turns oneDNN off for a network it slows down"),
    "cpu_bf16": Field("bool", "model", "true: checked in bf16 against fp32 on its dev splits; precision='auto' "
                      "runs it in bf16 on a CPU with AVX512-BF16 or AMX"),
    "weights_storage": Field("object", "record", "how the weights file stores its tensors (float16, int8 tables)"),
    "framework": Field("object", "record", "the framework versions that wrote the package"),
    "engine": Field("str", "lexical_analysis", "a package without a network names its engine ('jieba')"),
    # what the outputs mean
    "labels": Field("list", "model", "the output labels, in the network's order"),
    "classes": Field("list", "knowledge_mining", "the category classifier's classes"),
    "tag_set": Field("list", "ner", "the tags a trained ner package knows"),
    "entity_labels": Field("list", "ner", "which tags a trained ner package counts as entities"),
    "max_length": Field("int", "task", "the chars one unit holds; longer texts are split"),
    "hash_buckets": Field("int", "model", "buckets of the hashed bigram / word features"),
    "dictionary": Field("str", "lexical_analysis", "the dictionary file of a jieba package"),
    "word_dictionary": Field("str", "lexical_analysis", "the word list the tagger's word features read"),
    "term_tree": Field("str", "knowledge_mining", "the term tree file"),
    "labeller": Field("object", "knowledge_mining", "the labeller's rules and merge settings"),
    # calibration and decisions, fitted on dev by a recipe
    "temperature": Field("float", "sentiment_analysis", "calibration: softmax(log p / T) of the mix"),
    "label_bias": Field("object", "sentiment_analysis", "per label, added to log p before the temperature (fitted on dev)"),
    "threshold": Field("float", "text_similarity", "similarity at or above which the label is 1"),
    "calibration": Field("object", "text_similarity", "the network's score calibration"),
    "ensemble_threshold": Field("float", "text_similarity", "the ensemble's own threshold"),
    "ensemble_calibration": Field("object", "text_similarity", "the ensemble's own calibration"),
    # reading comprehension
    "max_seq_len": Field("int", "reading_comprehension", "window size in chars"),
    "doc_stride": Field("int", "reading_comprehension", "overlap of consecutive windows in chars"),
    "max_answer_len": Field("int", "reading_comprehension", "longest answer in chars"),
    "max_question_len": Field("int", "reading_comprehension", "question chars a window holds"),
    "features": Field("list", "reading_comprehension", "the reader's input features, in order"),
    "length_prior": Field("list", "reading_comprehension", "log-prior of answer lengths"),
    "null_threshold": Field("float", "reading_comprehension", "the 'no answer' margin of the reader alone"),
    "ensemble_null_threshold": Field("float", "reading_comprehension", "the 'no answer' margin of the ensemble"),
    "null_model": Field("object", "reading_comprehension", "a fitted 'no answer' scorer and its threshold"),
    "encoder_focus": Field("int", "reading_comprehension", "pieces of a window the member encoder reads"),
    # ensembles: ensemble.py
    "ensemble": Field("list", "ensemble", "the roles under requires whose networks mix with the package's own"),
    "ensemble_weights": Field("list", "ensemble", "each network's weight in the mix, the package's own first"),
    "ensemble_mixing": Field("str", "ensemble", "'arithmetic' or 'geometric' mean"),
    "ensemble_router": Field("str", "ensemble", "the role of a classifier whose labels are routes"),
    "ensemble_routes": Field("list", "ensemble", "per route: its networks, weights and confidence cut"),
    # records for people (how the package was made and how good it is)
    "training": Field("object", "record", "data, settings and duration of the training"),
    "metrics": Field("object", "record", "dev and test figures"),
    "length_prior_source": Field("object", "record", "where the length prior was counted"),
    "ensemble_selection": Field("object", "record", "how the ensemble's members were chosen"),
    **{f"{name}_tuning": Field("object", "record", f"the grid {name} was chosen on")
       for name in ("threshold", "null", "ensemble_weights", "ensemble_routes", "ensemble_threshold",
                    "ensemble_null", "encoder_focus", "label_bias")},
}


def check_fields(data: Mapping[str, Any], source: str) -> None:
    """Raise a :class:`ManifestError` naming the first field of ``data`` that is not in
    :data:`FIELDS` (with the closest known one) or whose value is not of its JSON type."""
    for key, value in data.items():
        field = FIELDS.get(key)
        if field is None:
            close = difflib.get_close_matches(str(key), FIELDS, n=1, cutoff=0.7)
            hint = f" Did you mean {close[0]!r}?" if close else " Remove it, or upgrade taskflow if a newer one wrote it."
            raise ManifestError(f"{source}: unknown field {key!r}.{hint} (taskflow.schema.FIELDS lists the fields "
                                "a manifest may hold)")
        if key == "version" and isinstance(value, int) and not isinstance(value, bool):
            continue     # an int version ("version": 2) is read as its str
        if value is None and key not in ("task", "name", "version", "files"):
            continue     # null is the field left out (a recipe writes "temperature": null for "none fitted")
        expected = _JSON_TYPES[field.kind]
        if isinstance(value, bool) and field.kind != "bool" or not isinstance(value, expected) or (
                field.kind == "float" and not math.isfinite(value)):
            wanted = "true or false" if field.kind == "bool" else f"a JSON {field.kind}"
            raise ManifestError(f"{source}: field {key!r} must be {wanted} ({field.help}), got "
                                f"{type(value).__name__} ({value!r:.60})")


def reference_table() -> str:
    """The field reference as a Markdown table (ARCHITECTURE.md holds it; a test keeps them equal)."""
    rows = ["| field | JSON type | read by | what it is |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {f.kind} | {f.read_by} | {f.help} |" for name, f in FIELDS.items()]
    return "\n".join(rows)


if __name__ == "__main__":
    print(reference_table())
