"""The manifest schema: every field known, typed, and a misspelt one refused by name."""

import json
from pathlib import Path

import pytest

from taskflow import Taskflow
from taskflow.errors import ManifestError
from taskflow.manifest import Manifest
from taskflow.schema import check_fields

RESOURCES = Path(__file__).resolve().parent.parent / "resources"


@pytest.mark.parametrize("path", sorted(RESOURCES.glob("**/manifest.json")),
                         ids=lambda p: str(p.parent.relative_to(RESOURCES)))
def test_every_bundled_manifest_holds_only_known_fields_of_their_types(path):
    check_fields(json.loads(path.read_text(encoding="utf-8")), str(path))


def test_a_misspelt_field_is_refused_by_name_with_the_near_miss(tiny_models, tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    source = tiny_models["sentiment_analysis"]
    for item in source.iterdir():
        (package / item.name).write_bytes(item.read_bytes())
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest["temprature"] = 0.9
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ManifestError, match="unknown field 'temprature'. Did you mean 'temperature'"):
        Taskflow("sentiment_analysis", task_path=package)


def test_a_field_of_the_wrong_type_is_refused():
    base = {"task": "sentiment_analysis", "name": "m", "version": "1.0.0",
            "files": {"weights.npz": {"sha256": "0" * 64, "size": 1}}}
    assert Manifest.from_dict(dict(base, temperature=0.9)).data["temperature"] == 0.9
    for field, value in (("temperature", "0.9"), ("temperature", True), ("temperature", float("nan")),
                         ("labels", "negative,positive"), ("onednn", 1), ("max_length", 2.5)):
        with pytest.raises(ManifestError, match=f"'{field}'"):
            Manifest.from_dict(dict(base, **{field: value}))
    with pytest.raises(ManifestError, match="unknown field 'colour'. Remove it"):
        Manifest.from_dict(dict(base, colour="red"))


def test_architecture_md_holds_the_field_reference_as_the_schema_prints_it():
    from taskflow.schema import reference_table

    text = (RESOURCES.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert reference_table() in text, "run `python -m taskflow.schema` and paste its table into ARCHITECTURE.md"
