"""The shipped sentiment_analysis model on clear cases, and its package."""

import json

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.packages import Manifest, available_models, _bundled_root

POSITIVE = ["这家酒店很干净，服务也好", "质量非常好，物流也快，满意！", "手机很好用，电池耐用"]
NEGATIVE = ["等了一个小时还没上菜", "屏幕有坏点，客服也不理人，太失望了", "房间又脏又吵，再也不会来了"]


@pytest.fixture(scope="module")
def senta():
    return Taskflow("sentiment_analysis", offline=True, return_all_scores=True)


def test_clear_sentences(senta):
    results = senta(POSITIVE + NEGATIVE)
    assert [r["label"] for r in results] == ["positive"] * 3 + ["negative"] * 3
    for r in results:
        assert r["score"] == max(r["scores"].values())
        assert set(r["scores"]) == {"negative", "positive"}


# raises=: a crash is a failure, not the known weakness.
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="known weakness of char_cnn 1.0.0 (see tasks/sentiment_analysis/README.md): "
                   "short praise with 精彩 reads as negative; a model that fixes it should flip this test")
def test_known_weakness_short_praise_with_jingcai(senta):
    assert senta(["这部电影太精彩了"])[0]["label"] == "positive"


def test_the_default_model_is_bundled_and_works_offline(senta):
    assert senta.model.source in ("bundled", "cache")
    assert "char_cnn" in available_models("sentiment_analysis")


def test_a_long_review_is_judged_by_all_its_chunks(senta):
    text = "房间很干净，早餐丰富，服务周到，下次还来。" * 40 + "就是停车不太方便。"
    (result,) = senta(text)
    assert len(text) > senta.task.max_length
    assert result["label"] == "positive" and result["text"] == text


def test_a_later_chunk_can_decide_the_label(senta):
    """Short praise, then a long complaint in a chunk of its own: the complaint, most of the text,
    decides, though the first chunk alone reads as positive."""
    praise = "房间很干净，早餐丰富，服务周到。"
    complaint = "，".join(["服务太差了，等了一个小时还没上菜，房间又脏又吵，空调坏了没人修，前台态度恶劣"] * 6)
    complaint += "，这种酒店再也不会来了"      # one sentence, so one chunk: praise + complaint > 256 >= complaint
    assert [piece for _, piece in senta.task.split(praise + complaint)] == [praise, complaint]
    assert senta(praise)[0]["label"] == "positive" and senta(complaint)[0]["label"] == "negative"
    (result,) = senta(praise + complaint)
    assert result["label"] == "negative" and result["scores"]["negative"] > 0.5


def test_chunks_that_disagree_are_mixed_by_length(tiny_sentiment):
    """A long text's scores are its chunks' probabilities weighted by chunk length: not the
    first chunk's, not an unweighted mean (the tiny model's chunks disagree)."""
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, return_all_scores=True)
    first, second = "房间很干净，服务也好，价格不贵，下次还来。", "差！"   # 20 and 2 chars: two chunks of <= 32
    text = first + "服务太差了，等了一个小时还没上菜，再也不来。" + second
    chunks = [piece for _, piece in flow.task.split(text)]
    assert len(chunks) >= 2 and "".join(chunks) == text
    alone = [flow(chunk)[0]["scores"]["positive"] for chunk in chunks]
    assert max(alone) - min(alone) > 1e-3, "the chunks must disagree for this test to mean anything"
    weights = [len(chunk) for chunk in chunks]
    expected = sum(w * p for w, p in zip(weights, alone)) / sum(weights)
    assert flow(text)[0]["scores"]["positive"] == pytest.approx(expected, abs=1e-6)
    assert expected != pytest.approx(alone[0], abs=1e-4)
    assert expected != pytest.approx(sum(alone) / len(alone), abs=1e-5)


def test_shipped_manifest_pins_its_files_and_records_its_training():
    manifest = Manifest.load(_bundled_root() / "sentiment_analysis" / "char_cnn" / "manifest.json")
    assert set(manifest.files) == {"weights.npz", "vocab.txt"}
    assert manifest["labels"] == ["negative", "positive"]
    assert all(not f.startswith(("chnsenticorp/test", "chnsenticorp/dev")) for f in manifest["training"]["train_files"])
    assert manifest["metrics"]["chnsenticorp_test"] > 0.9
    size = sum(entry["size"] for entry in manifest.files.values())
    assert size < 15 * 2**20, "package over the 15 MB budget"


def test_cli_download_reports_the_bundled_package(capsys):
    assert main(["download", "sentiment_analysis", "--offline"]) == 0
    out = capsys.readouterr().out
    assert "sentiment_analysis/char_cnn 1.0.0" in out and ("bundled" in out or "cache" in out)


def test_cli_text_output_is_json_lines(capsys):
    assert main(["senta", "服务太差了", "非常满意"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in rows] == ["negative", "positive"]
