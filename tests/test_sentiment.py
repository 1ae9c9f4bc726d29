"""The shipped sentiment_analysis model on clear cases, and its package."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import ManifestError
from taskflow.manifest import Manifest
from taskflow.packages import available_models, _bundled_root

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


# The accurate mode's networks, in its manifest's order (its ensemble_routes weigh them per genre).
ACCURATE_NETWORKS = ["encoder_ensemble", "char_cnn_neutral", "char_cnn", "char_cnn_posts"]


@pytest.fixture(scope="module")
def accurate():
    return Taskflow("sentiment_analysis", mode="accurate", offline=True, return_all_scores=True)


def test_accurate_mode_on_clear_sentences_and_contrasts(accurate):
    """The routed mix: the clear sentences, and contrasts whose second clause decides."""
    contrasts = {"虽然价格有点贵，但是味道真的很好": "positive", "快递很快，但是东西是坏的": "negative",
                 "包装很精美，可惜质量太差了": "negative", "房间不大，但是很干净": "positive"}
    results = accurate(POSITIVE + NEGATIVE + list(contrasts))
    assert [r["label"] for r in results] == ["positive"] * 3 + ["negative"] * 3 + list(contrasts.values())
    for r in results:
        assert r["score"] == max(r["scores"].values()) and sum(r["scores"].values()) == pytest.approx(1.0)
    task = accurate.task
    assert task.manifest.name == "encoder_ensemble" and [n.model.name for n in task.networks] == ACCURATE_NETWORKS
    assert task.ensemble.router.model.name == "genre_router"
    reviews, posts = task.ensemble.routes
    assert reviews.weights[0] > 0 and posts.weights[0] == 0      # the encoder read reviews only: posts skip it
    assert (reviews.first, posts.first) == (2, 3)                # each genre's char CNN answers first
    assert task.temperature is not None and task.labels == ["negative", "positive"]


def test_accurate_mode_mixes_what_each_network_says_alone():
    """Short texts (one chunk each): the accurate score is temper(the route's mix of its networks'
    probabilities of negative and positive), each network run alone; where the route's first network
    is sure, its own probabilities alone.  The texts cover both routes and both cascade outcomes.
    In fp32: in bf16 (the default's encoder on some CPUs) a row's last digits depend on how many
    rows its batch has, and here the mix reads fewer of them than the network alone."""
    from taskflow.ensemble import mix
    from taskflow.tasks.sentiment_analysis import temper

    accurate = Taskflow("sentiment_analysis", mode="accurate", offline=True, return_all_scores=True, precision="fp32")

    texts = ["服务态度不是很好", "这家店yyds", "房间不大，但是很干净", "看哭了[泪] //@小明:心疼", "菜还行吧，就是有点咸",
             "这个价格还能要求什么呢", "今天天气真好[太阳]", "唉，又加班到十点[衰]", "@小红 这也太离谱了吧",
             "刚到家，累成狗，但是很值[哈哈]", "@小李 你猜"] + POSITIVE
    root = _bundled_root() / "sentiment_analysis"
    fixed = dict(offline=True, return_all_scores=True, precision="fp32")
    alone = [Taskflow("sentiment_analysis", mode="accurate", ensemble=False, **fixed),
             Taskflow("sentiment_analysis", neutral=True, **fixed),
             Taskflow("sentiment_analysis", ensemble=False, **fixed),
             Taskflow("sentiment_analysis", task_path=root / "char_cnn_posts", **fixed)]
    assert [flow.task.model.name for flow in alone] == ACCURATE_NETWORKS
    for flow in alone:
        flow.task.temperature = None
    probs = np.array([[[r["scores"]["negative"], r["scores"]["positive"]] for r in flow(texts)] for flow in alone])
    probs /= probs.sum(axis=2, keepdims=True)
    genres = [r["label"] for r in Taskflow("sentiment_analysis", task_path=root / "genre_router")(texts)]
    task, seen = accurate.task, set()
    for k, (text, got) in enumerate(zip(texts, accurate(texts))):
        route = task.ensemble.routes[["reviews", "posts"].index(genres[k])]
        sure = probs[route.first, k].max() >= route.confident
        seen.add((genres[k], bool(sure)))
        mixed = probs[route.first, k] if sure else mix(probs[:, k], route.weights, task.mixing)
        expected = temper(mixed, task.temperature)
        assert [got["scores"]["negative"], got["scores"]["positive"]] == pytest.approx(expected, abs=1e-5), text
    assert seen == {("reviews", True), ("reviews", False), ("posts", True), ("posts", False)}, seen


# Hand-written posts in the Weibo manner: emoticon codes, @-mentions, 笑死 / 心好累 / 感冒的节奏.
POSTS = {"好悲伤，以后再也不想相信爱情了": "negative", "嗓子疼，又是要感冒的节奏[泪]": "negative",
         "突然的惊喜，多谢有你们[爱你]": "positive", "笑死我了哈哈哈哈，这是谁拼的图": "positive",
         "心好累，谁来顾及一下我的感受": "negative", "@小美 生日快乐呀，么么哒": "positive",
         "地铁挤死了，烦死了[怒]": "negative", "周末和闺蜜逛街，开心到飞起": "positive"}


def test_the_fast_mode_reads_posts_with_the_posts_network_and_reviews_with_its_own(senta):
    """The router sends the reviews to the package's own network (the scores are its, alone) and the
    posts to char_cnn_posts, which reads them right; the reviews' network alone misreads half of them."""
    task = senta.task
    assert [n.model.name for n in task.networks] == ["char_cnn", "char_cnn_posts"]
    assert task.ensemble.router.model.name == "genre_router" and task.ensemble.router.labels == ["reviews", "posts"]
    router = Taskflow("sentiment_analysis", task_path=_bundled_root() / "sentiment_analysis" / "genre_router")
    assert [r["label"] for r in router(POSITIVE + NEGATIVE)] == ["reviews"] * 6
    assert [r["label"] for r in router(list(POSTS))] == ["posts"] * len(POSTS)
    own = Taskflow("sentiment_analysis", ensemble=False, offline=True, return_all_scores=True)
    assert [r["scores"] for r in senta(POSITIVE + NEGATIVE)] == [r["scores"] for r in own(POSITIVE + NEGATIVE)]
    assert [r["label"] for r in senta(list(POSTS))] == list(POSTS.values())
    assert sum(r["label"] != gold for r, gold in zip(own(list(POSTS)), POSTS.values())) >= 3


# raises=: a crash is a failure, not the known weakness.
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="known weakness of char_cnn 1.0.0 to 1.3.0 (see tasks/sentiment_analysis/README.md): "
                   "short praise with 精彩 reads as negative; a model that fixes it should flip this test")
def test_known_weakness_short_praise_with_jingcai(senta):
    # 这部电影太精彩了 went the same way until 1.3.0, whose router sends it to the posts' network (positive).
    assert senta(["内容很精彩"])[0]["label"] == "positive"


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


def test_a_short_text_is_read_by_the_short_ngram_part_and_a_long_one_as_before(tmp_path):
    """``short_wide``: a text of at most ``short_length`` chars is mixed from the deep part and the
    short texts' own n-gram part (with the negation scope), a longer one from the deep part and the
    other n-gram part, whatever else its batch holds; through the product's static graph."""
    import paddle.nn.functional as F
    from make_tiny_models import make_tiny_sentiment

    from taskflow.tasks.text_classification.model import SentimentNet
    from taskflow.tasks.text_classification.train import Chars
    from taskflow.text import Normalizer
    from taskflow.weights import load_weights

    vocab = [line for line in (make_tiny_sentiment(tmp_path / "plain", seed=4) / "vocab.txt")
             .read_text(encoding="utf-8").splitlines()]
    ids = {c: i for i, c in enumerate(vocab)}
    package = make_tiny_sentiment(tmp_path / "tiny", seed=4, wide_buckets=7, deep_weight=0.6, short_length=3,
                                  short_deep_weight=0.1, short_wide=True, wide_negation=False,
                                  negator_ids=[ids["不"]], clause_break_ids=[ids[","]], negation_window=2)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    network = SentimentNet(**{k: v for k, v in manifest["architecture"].items() if k != "type"})
    load_weights(network, package / "weights.npz")
    network.eval()
    chars = Chars(vocab, 32, normalizer=Normalizer(manifest["normalization"]))
    texts = ["好", "不差", "很干净", "这家酒店很干净服务也好", "房间不干净"]

    def mixed(text, weight, short):
        return weight * chars.predict(network.deep_probs, [text])[0, 1] + (1 - weight) * chars.predict(
            lambda x: F.softmax(network.wide_logits(x, short=short), axis=-1), [text])[0, 1]

    expected = [mixed(t, 0.1, True) if len(t) <= 3 else mixed(t, 0.6, False) for t in texts]
    got = [r["scores"]["positive"] for r in Taskflow("sentiment_analysis", task_path=package, home=tmp_path / "home",
                                                     return_all_scores=True)(texts)]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # The two n-gram parts differ, so the test tells which one a text was read by.
    assert all(abs(mixed(t, 0.1, True) - mixed(t, 0.1, False)) > 1e-3 for t in texts[:3])
    assert all(abs(mixed(t, 0.6, False) - mixed(t, 0.6, True)) > 1e-3 for t in texts[3:])


def test_shipped_manifest_pins_its_files_and_records_its_training():
    manifest = Manifest.load(_bundled_root() / "sentiment_analysis" / "char_cnn" / "manifest.json")
    assert set(manifest.files) == {"weights.npz", "vocab.txt"}
    assert manifest["labels"] == ["negative", "positive"]
    assert all(not f.startswith(("chnsenticorp/test", "chnsenticorp/dev")) for f in manifest["training"]["train_files"])
    assert manifest["metrics"]["chnsenticorp_test"] > 0.9
    # Its size: test_model_files.py holds every bundled package to the budget.


def test_cli_download_reports_the_bundled_package(capsys):
    assert main(["download", "sentiment_analysis", "--offline"]) == 0
    out = capsys.readouterr().out
    version = Taskflow("sentiment_analysis").task.manifest.version     # the bundled package's
    assert f"sentiment_analysis/char_cnn {version}" in out and ("bundled" in out or "cache" in out)


def test_cli_text_output_is_json_lines(capsys):
    assert main(["senta", "服务太差了", "非常满意"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in rows] == ["negative", "positive"]


# --- training-side levers: augmentation and calibration -----------------------------------------

REAL = [("酒店离火车站很近，早餐种类也多", "positive"), ("电脑运行很快，散热也不错", "positive"),
        ("等了一个半小时才送到，饭菜都凉了", "negative"), ("这本书印刷粗糙，错别字很多", "negative"),
        ("服务很好", "positive")]   # 服务很好 is also a base of the suite's invariances


def test_augmentation_is_deterministic_per_seed():
    from recipes.sentiment_analysis.augment import KINDS, generate

    texts, labels = [t for t, _ in REAL] * 20, [y for _, y in REAL] * 20
    made = generate(texts, labels, seed=3, scale=0.2)
    assert made == generate(texts, labels, seed=3, scale=0.2)
    assert made != generate(texts, labels, seed=4, scale=0.2)
    assert {g.kind for g in made} == set(KINDS)
    assert {g.label for g in made} == {"positive", "negative", "neutral"}
    assert {g.label for g in made if g.kind == "no_opinion"} == {"neutral"}
    assert generate(texts, labels, kinds=["negation"], seed=3, scale=0.2) == [g for g in made if g.kind == "negation"]
    with pytest.raises(ValueError, match="kinds"):
        generate(texts, labels, kinds=["sarcasm"])
    with pytest.raises(ValueError, match="labels"):
        generate(["好"], ["good"])


@pytest.mark.parametrize("text, label", [
    # negation: of praise a complaint (also the lukewarm 不是很), of a fault praise only when strong
    ("面料不够柔软", "negative"), ("汤并不鲜美", "negative"), ("外观不是很时尚", "negative"),
    ("汤一点也不腥", "positive"), ("汤不腥", "positive"), ("卫生间丝毫不潮湿", "positive"),
    ("这件衣服一点线头都没有", "positive"), ("这款沐浴露一点效果都没有", "negative"),
    ("这件外套不值这个价", "negative"), ("买这件外套不亏", "positive"), ("文笔没话说", "positive"),
    ("送餐不靠谱", "negative"), ("找不出一个缺点", "positive"),
    # ... and without a subject, comparative negators with or without 那么
    ("一点也不腥", "positive"), ("不太友好", "negative"), ("没想象中那么糟糕", "positive"), ("没想象中拖沓", "positive"),
    ("没有预想的鲜美", "negative"),
    # contrast: the clause after the connective decides
    ("虽然床稍微有点硬，但是态度十分友好", "positive"), ("米饭蛮香的，但是汤超级腥", "negative"),
    ("虽然版型比较大方，可是真后悔买了", "negative"), ("触屏稍微有点迟钝，但手感超级细腻", "positive"),
    # slang
    ("这家火锅是真的yyds", "positive"), ("这款面霜绝绝子啊", "positive"), ("这家书店太坑了", "negative"),
    ("买了这份麻辣烫，血亏", "negative"), ("这个充电宝是真的拉胯", "negative"),
])
def test_generated_sentences_carry_the_label_a_reader_gives_them(template_sentences, text, label):
    assert template_sentences[text] == label


@pytest.fixture(scope="module")
def template_sentences() -> dict[str, str]:
    from recipes.sentiment_analysis.augment import (bare_negation_sentences, contrast_sentences, negation_sentences,
                                                    slang_sentences)

    return dict(negation_sentences() + bare_negation_sentences() + contrast_sentences() + slang_sentences())


def test_no_opinion_takes_statements_of_fact_and_real_sentences_without_an_opinion():
    from recipes.sentiment_analysis.augment import fact_sentences, generate, opinion_free

    facts = fact_sentences()
    assert "这件衣服是白色的" in facts and "这部小说有四百页左右" in facts and len(facts) == len(set(facts))
    assert opinion_free("借呗怎么还款") and opinion_free("这个酒店在五楼")
    for judged in ("花呗太坑了", "房间很干净", "客服态度差", "好评！", "借呗"):   # evaluative, or too short
        assert not opinion_free(judged), judged
    statements = ["借呗怎么还款", "花呗太坑了", "第六条 机场管理机构负责编制机场总体规划"]
    made = generate(["服务很好"] * 4, ["positive"] * 4, kinds=["no_opinion"], statements=statements)
    real = [g.text for g in made if g.source == "real"]
    assert real == ["借呗怎么还款", "第六条 机场管理机构负责编制机场总体规划"]
    assert {g.text for g in made if g.source == "template"} == set(facts)


def test_no_opinion_sentences_train_towards_equal_probabilities():
    """The loss weights: a labelled text's one-hot; a no_opinion text (-1) ``neutral_weight`` x
    (1/2, 1/2), whose loss -sum(w log p) is least at p = (1/2, 1/2)."""
    import numpy as np

    from recipes.sentiment_analysis.train import targets

    weights = targets(np.array([0, 1, -1]), 0.5)
    assert weights.tolist() == [[1, 0], [0, 1], [0.25, 0.25]]
    grid = np.linspace(0.01, 0.99, 99)
    loss = -(weights[2] * np.log(np.stack([1 - grid, grid], axis=1))).sum(axis=1)
    assert grid[loss.argmin()] == pytest.approx(0.5)


def test_teacher_labelled_texts_train_towards_the_teachers_probabilities():
    import numpy as np

    from recipes.sentiment_analysis.train import TEACHER_LABEL, targets

    weights = targets(np.array([1, TEACHER_LABEL, -1]), 0.5, np.array([np.nan, 0.8, np.nan]), teacher_weight=2.0)
    assert np.allclose(weights, [[0, 1], [0.4, 1.6], [0.25, 0.25]])
    grid = np.linspace(0.01, 0.99, 99)
    loss = -(weights[1] * np.log(np.stack([1 - grid, grid], axis=1))).sum(axis=1)
    assert grid[loss.argmin()] == pytest.approx(0.8)


def test_teacher_reads_corpus_lines_and_the_recipe_learns_its_labels(tmp_path):
    """teacher.py: a package reads the units of unlabelled files (keyword lines and short lines
    skipped, a long line cut into groups of sentences, repeats read once) and writes its
    probabilities; the recipe trains on them and records them; a broken file is named by line."""
    from recipes.sentiment_analysis.teacher import GROUP_CHARS, main as teach
    from recipes.sentiment_analysis.train import main as train

    data = _tiny_sentiment_data(tmp_path / "data")
    assert train(["--data-dir", str(data), "--out", str(tmp_path / "teacher"), "--augment", "none",
                  "--skip-calibration", *TINY_NETWORK]) == 0
    long_line = "这家店的菜很好吃。" * 20
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["山东队,CBA,劳森,新疆队", "好", "虽然贵了点，不过看的感觉还是很好", long_line,
                                  "服务态度太差了，再也不来"]) + "\n", encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("服务态度太差了，再也不来\n", encoding="utf-8")
    out = tmp_path / "teacher.tsv"
    assert teach(["--task-path", str(tmp_path / "teacher"), "--text", str(corpus), str(other),
                  "--per-file", "100", "--out", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["text", "positive", "source"]
    texts = [r[0] for r in rows[1:]]
    assert texts[0] == "虽然贵了点，不过看的感觉还是很好" and texts.count("服务态度太差了，再也不来") == 1
    pieces = [t for t in texts if t.startswith("这家店")]
    assert len(pieces) == 2 and "".join(pieces) == long_line and max(map(len, pieces)) <= GROUP_CHARS
    assert all(0.0 <= float(r[1]) <= 1.0 for r in rows[1:])
    about = json.loads((tmp_path / "teacher.tsv.json").read_text(encoding="utf-8"))
    assert about["units"] == len(texts) == 4 and about["files"]["other.txt"] == {"units": 1, "taken": 1}

    assert train(["--data-dir", str(data), "--out", str(tmp_path / "student"), "--augment", "none",
                  "--teacher-labels", str(out), "--teacher-weight", "0.5", "--skip-calibration", *TINY_NETWORK]) == 0
    training = Manifest.load(tmp_path / "student" / "manifest.json")["training"]
    assert training["examples"] == {"real": 144, "reviews": 144, "social": 0, "generated": 0, "teacher": 4}
    record = training["teacher_labels"]
    assert record["weight"] == 0.5 and record["files"][0]["units"] == 4 and record["files"][0]["teacher"]["name"]

    out.write_text("text\tpositive\n好吃\t0.9\n难吃\t1.7\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 3"):
        train(["--data-dir", str(data), "--out", str(tmp_path / "bad"), "--teacher-labels", str(out), *TINY_NETWORK])


def test_only_the_opt_in_no_opinion_kind_adds_texts_without_a_label():
    """What other trainers reuse (pretraining/finetune_classifier.py takes DEFAULT_AUGMENT): the
    default kinds give labels 0 / 1 only; no_opinion's texts carry -1, the recipe's "equal halves"."""
    from recipes.sentiment_analysis.train import DEFAULT_AUGMENT, augmented

    texts, labels = [t for t, _ in REAL] * 20, [int(y == "positive") for _, y in REAL] * 20
    _, default_labels, record = augmented(texts, labels, list(DEFAULT_AUGMENT), seed=0, scale=0.05)
    assert set(default_labels) == {0, 1} and "neutral" not in record["labels"]
    _, all_labels, _ = augmented(texts, labels, list(DEFAULT_AUGMENT) + ["no_opinion"], seed=0, scale=0.05)
    assert set(all_labels) == {-1, 0, 1}


def test_balance_social_gives_each_polar_label_half_the_posts_weight():
    from recipes.sentiment_analysis.train import NEUTRAL_LABEL, balancing_weights

    labels = [0, 0, 0, 1, NEUTRAL_LABEL]
    weights = balancing_weights(labels)
    assert weights.tolist() == pytest.approx([4 / 6, 4 / 6, 4 / 6, 2.0, 1.0])
    assert weights[:3].sum() == pytest.approx(weights[3])          # negatives and positives weigh alike
    assert balancing_weights([1, 1]).tolist() == [1.0, 1.0]         # one label only: nothing to balance


def test_faint_or_ambiguous_negations_are_not_generated():
    from recipes.sentiment_analysis.augment import bare_negation_sentences, negation_sentences

    texts = {t for t, _ in negation_sentences()}
    assert "送餐不太拖拉" not in texts and "外观不难看" not in texts      # lukewarm, not praise
    bare = {t for t, _ in bare_negation_sentences()}
    assert "不太拖拉" not in bare and "不难看" not in bare and "不甜" not in bare   # 甜: which aspect?
    assert "大堂不豪华" not in texts                                      # a fact, not a complaint
    assert "送餐不太迅速" in texts                                         # 不太 + praise is a complaint


def test_training_and_suite_vocabularies_share_nothing():
    """The held-out protocol: the suite's negation, contrast and slang cases use aspects,
    adjectives, subjects, frames and emoji no generated training sentence used."""
    from recipes.sentiment_analysis.augment import TRAIN_VOCABULARY
    from recipes.sentiment_analysis.robustness import SUITE_VOCABULARY

    assert set(TRAIN_VOCABULARY) == set(SUITE_VOCABULARY)
    for part in SUITE_VOCABULARY:
        assert SUITE_VOCABULARY[part] and TRAIN_VOCABULARY[part], part
    every_train, every_suite = set().union(*TRAIN_VOCABULARY.values()), set().union(*SUITE_VOCABULARY.values())
    assert not every_train & every_suite


def test_no_generated_sentence_is_a_suite_sentence():
    from recipes.sentiment_analysis.augment import Generated, _held_out, _key, generate
    from recipes.sentiment_analysis.robustness import generate_cases

    suite = {_key(t) for c in generate_cases(per_kind=None) for t in (c.text, c.original) if t is not None}
    made = generate([t for t, _ in REAL] * 40, [y for _, y in REAL] * 40, seed=0, scale=1.0)
    assert made and not [g for g in made if _key(g.text) in suite]
    # 服务很好 is a suite base: its copies (服务很好！, 服务很好 ...) would be suite variants.
    assert not [g for g in made if g.kind == "invariance" and _key(g.text) == "服务很好"]
    with pytest.raises(AssertionError, match="suite"):   # a template that makes a suite case is a bug in the lists
        _held_out([Generated("这家店的奶茶yyds", "positive", "slang", "template")])
    with pytest.raises(AssertionError, match="suite"):   # ... as is one that contains an issue sentence
        _held_out([Generated("米饭不是很好吃", "negative", "negation", "template")])


def test_temperature_changes_scores_not_labels(tiny_models, tmp_path):
    import shutil

    import numpy as np

    from taskflow.errors import ManifestError
    from taskflow.tasks.sentiment_analysis import temper
    from recipes.tuning import update_manifest

    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "好" * 100, "房间很干净。" * 10 + "差！"]
    plain = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], return_all_scores=True)
    assert plain.task.temperature is None
    before = plain(texts)
    package = shutil.copytree(tiny_models["sentiment_analysis"], tmp_path / "calibrated")
    update_manifest(package, {"temperature": 0.05})
    after = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True)(texts)
    assert [r["label"] for r in after] == [r["label"] for r in before]
    for b, a in zip(before, after):
        raw = np.array([b["scores"]["negative"], b["scores"]["positive"]])
        assert [a["scores"]["negative"], a["scores"]["positive"]] == pytest.approx(temper(raw, 0.05).tolist(), abs=1e-9)
        assert a["score"] == max(a["scores"].values()) and a["score"] > b["score"]   # T < 1 sharpens
    update_manifest(package, {"temperature": 1.0})
    same = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True)(texts)
    assert [r["scores"]["positive"] for r in same] == pytest.approx([r["scores"]["positive"] for r in before], abs=1e-6)
    update_manifest(package, {"temperature": -1})
    with pytest.raises(ManifestError, match="temperature"):
        Taskflow("sentiment_analysis", task_path=package)


def test_fit_temperature_recovers_an_overconfident_models_temperature():
    import numpy as np

    from recipes.sentiment_analysis.train import expected_calibration_error, fit_temperature, negative_log_likelihood
    from taskflow.tasks.sentiment_analysis import temper

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, 20000)
    labels = (rng.random(20000) < 1 / (1 + np.exp(-logits))).astype(int)      # calibrated: p = sigmoid(logit)
    calibrated = np.stack([1 / (1 + np.exp(logits)), 1 / (1 + np.exp(-logits))], axis=1)
    overconfident = temper(calibrated, 0.5)                                    # as if logits were doubled
    found = fit_temperature(overconfident, labels)
    assert found == pytest.approx(2.0, rel=0.1)
    assert negative_log_likelihood(temper(overconfident, found), labels) < negative_log_likelihood(overconfident, labels)
    assert expected_calibration_error(temper(overconfident, found), labels) < 0.02 < \
        expected_calibration_error(overconfident, labels)


def _tiny_sentiment_data(root):
    import random

    praise = ["房间很干净，服务也好", "菜很好吃，下次还来", "物流很快，包装很好", "质量不错，很满意", "屏幕清晰，运行流畅"]
    complaints = ["服务太差了", "等了一个小时还没上菜", "质量很差，用了两天就坏了", "房间又脏又吵", "客服态度很差"]
    facts = ["明天上午九点开会", "本次列车终点站是北京", "这本书有三百页", "会议改到三楼举行"]
    layout = {"chnsenticorp": ("train", "dev", "test", "test.dedup"), "online_shopping_10_cats": ("train", "dev", "test"),
              "waimai_10k": ("train", "dev", "test")}
    for name, splits in layout.items():
        for k, split in enumerate(splits):
            rng = random.Random(f"{name}:{split}")
            rows = ["label\ttext"]
            for i in range(24):
                rows += [f"1\t{rng.choice(praise)}{i + 100 * k}", f"0\t{rng.choice(complaints)}{i + 100 * k}"]
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / name / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    # SMP2020-EWECT's layout and six labels: 2 happy, 1 angry, 0 neutral, 5 surprise (left out).
    for name in ("usual", "virus"):
        for k, split in enumerate(("train", "dev", "test")):
            rng = random.Random(f"smp:{name}:{split}")
            rows = ["label\ttext_a"]
            for i in range(12):
                rows += [f"2\t@小明 {rng.choice(praise)}[哈哈]{i + 100 * k}", f"1\t{rng.choice(complaints)}[怒]{i}",
                         f"0\t{rng.choice(facts)}{i + 100 * k}", f"5\t天哪{i}"]
            (root / "smp2020_ewect" / name).mkdir(parents=True, exist_ok=True)
            (root / "smp2020_ewect" / name / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


TINY_NETWORK = ["--max-len", "32", "--min-freq", "1", "--embed-dim", "8", "--bigram-buckets", "64", "--ngram-dim", "4",
                "--conv-channels", "4", "--max-kernel", "3", "--epochs", "1", "--wide-epochs", "1",
                "--wide-buckets", "1024", "--batch-size", "16"]


def test_recipe_with_augmentation_records_it_and_calibrates(tmp_path):
    """A smoke run of the two-stage recipe on a tiny data folder: the generated sentences and the
    temperature are in the manifest, and the package runs with it."""
    from recipes.sentiment_analysis.train import main as train

    data = _tiny_sentiment_data(tmp_path / "data")
    assert train(["--data-dir", str(data), "--out", str(tmp_path / "pkg"), "--augment-scale", "0.05",
                  "--social-sets", "usual,virus", *TINY_NETWORK]) == 0
    manifest = Manifest.load(tmp_path / "pkg" / "manifest.json")
    augmentation = manifest["training"]["augmentation"]
    assert augmentation["kinds"] == ["invariance", "negation", "contrast", "slang"]   # no_opinion is opt-in
    assert augmentation["scale"] == 0.05
    # SIZES["negation"] (4000) + SIZES["negation_bare"] (600), x 0.05
    assert augmentation["by_kind"]["negation"]["template"] == 230
    assert manifest["training"]["examples"] == {"real": 192, "reviews": 144, "social": 48,
                                                "generated": augmentation["sentences"], "teacher": 0}
    assert manifest["normalization"] == ["social", "t2s", "width", "lower"]
    assert manifest["training"]["selection"]["splits"] == [
        "chnsenticorp/dev.tsv", "online_shopping_10_cats/dev.tsv", "waimai_10k/dev.tsv",
        "smp2020_ewect/usual/dev.tsv", "smp2020_ewect/virus/dev.tsv"]
    assert {"smp2020_ewect_usual_test", "smp2020_ewect_virus_test"} <= set(manifest["metrics"])
    assert manifest["temperature"] > 0
    dev = manifest["calibration"]["figures"]["chnsenticorp_dev"]
    assert dev["nll"][1] <= dev["nll"][0]          # fitted on dev: it cannot get worse there
    flow = Taskflow("sentiment_analysis", task_path=tmp_path / "pkg")
    assert flow.task.temperature == manifest["temperature"]
    assert flow(["服务太差了"])[0]["label"] in ("positive", "negative")

    # The standalone fit on an existing package writes the same temperature (same data, same model).
    assert train(["--calibrate", str(tmp_path / "pkg"), "--data-dir", str(data)]) == 0
    assert Manifest.load(tmp_path / "pkg" / "manifest.json")["temperature"] == manifest["temperature"]


def test_recipe_reads_opinion_free_sentences_for_the_no_opinion_kind(tmp_path):
    from recipes.sentiment_analysis.train import main as train

    data = _tiny_sentiment_data(tmp_path / "data")
    questions = tmp_path / "questions.tsv"
    questions.write_text("text_a\ttext_b\tlabel\n借呗怎么还款\t花呗账单在哪里看\t0\n花呗太坑了\t怎么开通花呗\t0\n",
                         encoding="utf-8")
    assert train(["--data-dir", str(data), "--out", str(tmp_path / "pkg"), "--augment", "no_opinion",
                  "--neutral-text", str(questions), "--skip-calibration", *TINY_NETWORK]) == 0
    augmentation = Manifest.load(tmp_path / "pkg" / "manifest.json")["training"]["augmentation"]
    assert augmentation["by_kind"]["no_opinion"]["real"] == 3          # 花呗太坑了 is not opinion-free
    assert augmentation["no_opinion"]["statements_read"] == 3 and augmentation["no_opinion"]["weight"] == 0.5
    assert augmentation["labels"]["neutral"] == augmentation["sentences"]

    bad = tmp_path / "bad.tsv"
    bad.write_text("question\tanswer\n借呗怎么还款\t看账单\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs one of the columns .'text_a', 'text_b', 'text', 'sentence1', 'sentence2'."):
        train(["--data-dir", str(data), "--out", str(tmp_path / "pkg2"), "--augment", "no_opinion",
               "--neutral-text", str(bad), *TINY_NETWORK])
    with pytest.raises(SystemExit):   # the default kinds leave no_opinion out: the file would be read for nothing
        train(["--data-dir", str(data), "--out", str(tmp_path / "pkg3"), "--neutral-text", str(questions), *TINY_NETWORK])


def test_the_recipe_reads_squad_contexts_and_questions_and_takes_as_many_statements_as_asked(tmp_path):
    import json

    from recipes.sentiment_analysis.train import read_statements

    squad = tmp_path / "cmrc.json"
    squad.write_text(json.dumps({"data": [{"paragraphs": [{
        "context": "故宫位于北京市中心。它建于明代永乐年间。这里的风景太美了！",
        "qas": [{"question": "故宫位于哪里？", "answers": []}, {"question": "故宫建于什么时候？", "answers": []}]}]}]},
        ensure_ascii=False), encoding="utf-8")
    taken = read_statements([str(squad)], 10)
    # Sentences of the context (cut at 。！？) and the questions; the evaluative one is not opinion-free.
    assert taken == ["故宫位于北京市中心", "它建于明代永乐年间", "故宫位于哪里", "故宫建于什么时候"]
    assert read_statements([str(squad)], 2) == ["故宫位于北京市中心", "故宫位于哪里"]   # evenly spread


def test_recipe_without_augmentation_records_none(tmp_path):
    from recipes.sentiment_analysis.train import main as train

    data = _tiny_sentiment_data(tmp_path / "data")
    assert train(["--data-dir", str(data), "--out", str(tmp_path / "pkg"), "--augment", "none",
                  "--skip-calibration", *TINY_NETWORK]) == 0
    manifest = Manifest.load(tmp_path / "pkg" / "manifest.json")
    assert manifest["training"]["augmentation"] is None and manifest["training"]["examples"]["generated"] == 0
    assert manifest.get("temperature") is None and manifest.get("calibration") is None


GENRE_DEV_GENRES = {"film", "book", "forum", "product_qa", "news_comment", "app", "game", "restaurant", "travel",
                    "course"}


def test_genre_dev_format():
    """recipes/sentiment_analysis/dev/genre_dev.tsv: the hand-checked out-of-genre set that
    benchmarks/accuracy_sentiment_genre.py scores."""
    import csv
    from collections import Counter
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "recipes" / "sentiment_analysis" / "dev" / "genre_dev.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "label\tgenre\ttext"
    assert all(line.count("\t") == 2 for line in lines), "every row is three tab-separated fields"
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == len(lines) - 1 >= 300
    assert {r["label"] for r in rows} <= {"positive", "negative"}
    assert {r["genre"] for r in rows} <= GENRE_DEV_GENRES
    per_genre = Counter(r["genre"] for r in rows)
    assert len(per_genre) >= 8 and min(per_genre.values()) >= 25, per_genre
    texts = [r["text"] for r in rows]
    assert all(t == t.strip() and 8 <= len(t) <= 150 for t in texts)
    assert len(set(texts)) == len(texts), "no text twice"
    assert 0.4 <= sum(r["label"] == "positive" for r in rows) / len(rows) <= 0.6


def test_recipe_neutral_trains_three_labels_that_neutral_true_reports(tmp_path):
    """--neutral: SMP2020's neutral rows and the statements of fact are a third label; the package
    runs with neutral=True and gives three probabilities; a two-label package refuses neutral=True."""
    from recipes.sentiment_analysis.train import main as train
    from taskflow.errors import OptionError

    data = _tiny_sentiment_data(tmp_path / "data")
    assert train(["--data-dir", str(data), "--out", str(tmp_path / "pkg"), "--neutral", "--augment-scale", "0.01",
                  *TINY_NETWORK]) == 0
    manifest = Manifest.load(tmp_path / "pkg" / "manifest.json")
    assert manifest["labels"] == ["negative", "positive", "neutral"]
    assert manifest["training"]["examples"]["social"] == 72          # 24 happy, 24 angry, 24 neutral rows
    assert "no_opinion" in manifest["training"]["augmentation"]["kinds"]
    assert manifest["training"]["augmentation"]["no_opinion"]["target"] == "the label neutral"
    assert set(manifest["metrics"]["three_way_macro_f1"]) == {"smp2020_ewect/usual/test.tsv",
                                                               "smp2020_ewect/virus/test.tsv"}
    flow = Taskflow("sentiment_analysis", task_path=tmp_path / "pkg", neutral=True, return_all_scores=True)
    [result] = flow(["明天上午九点开会"])
    assert result["label"] in ("negative", "positive", "neutral")
    assert set(result["scores"]) == {"negative", "positive", "neutral"}
    assert abs(sum(result["scores"].values()) - 1) < 1e-6

    # --neutral-bias: the shift of log p(neutral) chosen on dev is the grid's best, and applied.
    import numpy as np

    from recipes.tuning import update_manifest
    from taskflow.errors import ManifestError
    from taskflow.tasks.sentiment_analysis import shifted

    texts = ["明天上午九点开会", "房间很干净，服务也好", "服务太差了", "会议改到三楼举行"]
    assert train(["--neutral-bias", str(tmp_path / "pkg"), "--data-dir", str(data)]) == 0
    manifest = Manifest.load(tmp_path / "pkg" / "manifest.json")
    tuning, bias = manifest["label_bias_tuning"], manifest["label_bias"]["neutral"]
    best = max(row[1] for row in tuning["grid"])
    assert tuning["chosen"] == {"bias": bias, "dev": best} and best >= tuning["unshifted"]
    assert abs(bias) == min(abs(row[0]) for row in tuning["grid"] if row[1] == best)    # ties: the smallest shift
    update_manifest(tmp_path / "pkg", {"label_bias": None, "temperature": None})
    raw = Taskflow("sentiment_analysis", task_path=tmp_path / "pkg", neutral=True, return_all_scores=True)(texts)
    update_manifest(tmp_path / "pkg", {"label_bias": {"neutral": -2.5}})
    after = Taskflow("sentiment_analysis", task_path=tmp_path / "pkg", neutral=True, return_all_scores=True)(texts)
    order = ("negative", "positive", "neutral")
    for r, a in zip(raw, after):
        expected = shifted(np.array([r["scores"][k] for k in order]), np.array([0.0, 0.0, -2.5]))
        assert [a["scores"][k] for k in order] == pytest.approx(expected.tolist(), abs=1e-6)
        assert a["label"] == order[int(expected.argmax())]
    update_manifest(tmp_path / "pkg", {"label_bias": {"neutrall": 1.0}})
    with pytest.raises(ManifestError, match="label_bias"):
        Taskflow("sentiment_analysis", task_path=tmp_path / "pkg", neutral=True)

    # router --neutral-route: the three-label network beside the bundled fast mode's routed networks,
    # its polarity weight, mixing and neutral bias chosen together on dev; "neutral" is its own say.
    from recipes.sentiment_analysis.router import main as route

    update_manifest(tmp_path / "pkg", {"label_bias": None})
    assert route(["--neutral-route", str(tmp_path / "pkg"), "--out", str(tmp_path / "composed"), "--version", "0.0.9",
                  "--data-dir", str(data), "--own-weights", "0.2", "0.6"]) == 0
    composed = Manifest.load(tmp_path / "composed" / "manifest.json")
    assert composed["requires"] == {"reviews": "sentiment_analysis/char_cnn", "posts": "sentiment_analysis/char_cnn_posts",
                                    "router": "sentiment_analysis/genre_router"}
    tuning = composed["ensemble_routes_tuning"]
    assert len(tuning["grid"]) == 4 and tuning["chosen"]["dev"] == max(row[2] for row in tuning["grid"])
    weight = tuning["chosen"]["own_weight"]
    assert composed["ensemble_routes"] == [{"weights": [weight, 1 - weight, 0]}, {"weights": [weight, 0, 1 - weight]}]
    assert composed["ensemble_mixing"] == tuning["chosen"]["mixing"] and composed.get("temperature") is None
    mixed = Taskflow("sentiment_analysis", task_path=tmp_path / "composed", neutral=True, return_all_scores=True)
    own = Taskflow("sentiment_analysis", task_path=tmp_path / "composed", neutral=True, return_all_scores=True,
                   ensemble=False)
    assert len(mixed.task.networks) == 3
    for m, o in zip(mixed(texts), own(texts)):
        assert m["scores"]["neutral"] == pytest.approx(o["scores"]["neutral"], abs=1e-6)
        assert sum(m["scores"].values()) == pytest.approx(1.0, abs=1e-6)
    assert any(m["scores"]["positive"] != pytest.approx(o["scores"]["positive"], abs=1e-3)
               for m, o in zip(mixed(texts), own(texts)))

    assert train(["--data-dir", str(data), "--out", str(tmp_path / "two"), "--augment", "none",
                  "--skip-calibration", *TINY_NETWORK]) == 0
    with pytest.raises(OptionError, match="neutral=True needs a model with the label 'neutral'"):
        Taskflow("sentiment_analysis", task_path=tmp_path / "two", neutral=True)
    with pytest.raises(SystemExit):      # the neutral label is learnt from SMP2020's neutral rows
        train(["--data-dir", str(data), "--out", str(tmp_path / "x"), "--neutral", "--social-sets", "none",
               *TINY_NETWORK])


def test_neutral_true_with_the_accurate_mode_says_it_has_two_labels():
    from taskflow.errors import OptionError

    with pytest.raises(OptionError, match="the accurate mode has two labels only"):
        Taskflow("sentiment_analysis", mode="accurate", neutral=True)
    with pytest.raises(OptionError, match="neutral must be True or False"):
        Taskflow("sentiment_analysis", neutral="yes")


def test_social_markup_is_read_as_one_char_each():
    """An emoticon code, an @-mention and a URL are one char each; a reference mark [1] stays."""
    from taskflow.tasks.text_classification import encode
    from taskflow.text import MENTION_CHAR, URL_CHAR, Normalizer, emoticon_char

    social = Normalizer(["social", "t2s", "width", "lower"])
    assert social("看哭了[泪]") == "看哭了" + emoticon_char("泪")
    assert social("笑死［哈哈］") == "笑死" + emoticon_char("哈哈")                 # full-width brackets
    assert social("@中国电信 宽带又断了") == MENTION_CHAR + " 宽带又断了"
    assert social("有谁是想打@至上励合张远是吗？") == "有谁是想打" + MENTION_CHAR + "?"
    assert social("转发//@小明:好看") == "转发//" + MENTION_CHAR + ":好看"
    # An @ that no punctuation closes within 12 chars: the post's own words stay.
    assert social("@中国电信明明到明年2月才到期就提醒我欠费") == MENTION_CHAR + "中国电信明明到明年2月才到期就提醒我欠费"
    assert social("详见 https://t.cn/A6x?a=1 谢谢") == "详见 " + URL_CHAR + " 谢谢"
    assert social("参考[1]和[a]") == "参考[1]和[a]"
    assert social("点赞👍🏻") == social("点赞👍") == "点赞👍"
    assert not social.keeps_length
    vocab = {"[PAD]": 0, "[UNK]": 1, "哭": 2, emoticon_char("泪"): 3}
    assert encode(["哭[泪]", "🏻"], vocab, social).tolist() == [[2, 3], [1, 0]]   # an emptied text: one unknown char


# --- the fast mode's genre router -------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_router(tmp_path_factory) -> Path:
    """A genre router trained by its recipe on the tiny data: reviews against posts."""
    from recipes.sentiment_analysis.router import main as train_router

    root = tmp_path_factory.mktemp("router")
    data = _tiny_sentiment_data(root / "data")
    assert train_router(["--data-dir", str(data), "--out", str(root / "router"), "--buckets", "1024",
                         "--epochs", "15", "--batch-size", "16", "--lr", "0.05"]) == 0
    return root / "router"


def _routed(folder: Path, router: Path, **fields) -> Path:
    """A tiny sentiment package (seed 1) that routes each text to itself or its member ``posts`` (seed 2)."""
    import shutil

    from make_tiny_models import make_tiny_sentiment

    make_tiny_sentiment(folder, seed=1)
    make_tiny_sentiment(folder / "posts", seed=2)
    shutil.copytree(router, folder / "router")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest.update({"requires": {"posts": "./posts", "router": "./router"}, "ensemble": ["posts"],
                     "ensemble_router": "router", **fields})
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def test_the_genre_router_recipe_learns_reviews_from_posts(tiny_router):
    manifest = Manifest.load(tiny_router / "manifest.json")
    assert manifest["architecture"]["type"] == "ngram_linear" and manifest["labels"] == ["reviews", "posts"]
    assert manifest["normalization"] == ["social", "t2s", "width", "lower"]
    assert manifest["training"]["examples"] == {"reviews": 144, "posts": 96}   # every SMP2020 row is a post
    accuracy = manifest["metrics"]["genre_accuracy"]
    assert set(accuracy) == {"chnsenticorp/dev", "online_shopping_10_cats/dev", "waimai_10k/dev",
                             "smp2020_ewect/usual/dev", "smp2020_ewect/virus/dev"}
    assert min(accuracy.values()) > 0.9


def test_a_routed_package_runs_each_text_through_the_network_its_router_picks(tiny_router, tmp_path):
    """Each text's scores are those of the one network the router sends it to, run alone; a text
    whose chunks go to different networks mixes them by the chunks' lengths."""
    from make_tiny_models import make_tiny_sentiment

    package = _routed(tmp_path / "routed", tiny_router)
    make_tiny_sentiment(tmp_path / "seed_1", seed=1)        # the package's own network, as a package alone
    routed = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True)
    assert [n.model.version for n in routed.task.networks] == ["0.0.1", "0.0.2"]
    alone = [Taskflow("sentiment_analysis", task_path=package, return_all_scores=True, ensemble=False),
             Taskflow("sentiment_analysis", task_path=package / "posts", return_all_scores=True)]
    assert len(alone[0].task.networks) == 1 and alone[0].task.ensemble.router is None
    router = Taskflow("sentiment_analysis", task_path=tiny_router, return_all_scores=True)
    texts = ["房间很干净，服务也好", "质量很差，用了两天就坏了", "@小明 菜很好吃，下次还来[哈哈]", "客服态度很差[怒]",
             "明天上午九点开会"]
    genres = [r["label"] for r in router(texts)]
    assert set(genres) == {"reviews", "posts"}, "both networks must be picked for this test to mean anything"
    for text, genre, got in zip(texts, genres, routed(texts)):
        expected = alone[genre == "posts"]([text])[0]["scores"]
        assert got["scores"] == pytest.approx(expected, abs=1e-6), text
    for k in (0, 1):
        assert alone[0]([texts[k]])[0]["scores"] != pytest.approx(alone[1]([texts[k]])[0]["scores"], abs=1e-4)
    # More texts than a batch: each network's texts are batched apart (by the plan's keys), same scores.
    small_batches = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True, batch_size=2)
    keys = small_batches.task.plan([(0, t) for t in texts])
    assert [keys[k] == keys[texts.index(texts[2])] for k in range(len(texts))] == [g == "posts" for g in genres]
    batches = []
    preprocess = small_batches.task.preprocess
    small_batches.task.preprocess = lambda units, routes: batches.append(routes) or preprocess(units, routes)
    small_batches(texts)
    assert len(batches) == 3 and all(len(set(routes)) == 1 for routes in batches), batches
    del small_batches.task.preprocess
    for got, expected in zip(small_batches(texts), routed(texts)):
        assert got["scores"] == pytest.approx(expected["scores"], abs=1e-6)

    mixed_text = "房间很干净，服务也好，价格不贵，下次还来，质量不错。" + "@小明 明天上午九点开会[哈哈]！" * 2
    chunks = [chunk for _, chunk in routed.task.split(mixed_text)]
    chunk_genres = [r["label"] for r in router(chunks)]
    assert len(set(chunk_genres)) == 2, chunk_genres
    weights = np.array([len(chunk) for chunk in chunks], dtype=float)
    each = np.array([[alone[g == "posts"]([c])[0]["scores"][label] for label in ("negative", "positive")]
                     for c, g in zip(chunks, chunk_genres)])
    expected = (weights[:, None] * each).sum(axis=0) / weights.sum()
    got = routed([mixed_text])[0]["scores"]
    assert [got["negative"], got["positive"]] == pytest.approx(expected.tolist(), abs=1e-6)

    seed_1 = Taskflow("sentiment_analysis", task_path=tmp_path / "seed_1", return_all_scores=True)
    assert [r["scores"] for r in alone[0](texts)] == [r["scores"] for r in seed_1(texts)]


def _scores(flow, texts) -> np.ndarray:
    return np.array([[r["scores"][label] for label in ("negative", "positive")] for r in flow(texts)])


def test_a_route_mixes_its_networks_and_asks_its_first_network_first(tiny_router, tmp_path):
    """ensemble_routes: reviews get the geometric mix of the package's own network and a third one;
    posts go to the posts' network alone, which answers alone where it is sure and is mixed with the
    package's own network where it is not (a cascade)."""
    from make_tiny_models import make_tiny_sentiment
    from taskflow.ensemble import mix

    texts = ["房间很干净，服务也好", "质量很差，用了两天就坏了", "@小明 菜很好吃，下次还来[哈哈]", "客服态度很差[怒]",
             "明天上午九点开会", "@小红 今天好开心[哈哈]", "//@小李: 又迟到了[怒]"]
    genres = [r["label"] for r in Taskflow("sentiment_analysis", task_path=tiny_router)(texts)]
    assert genres.count("posts") >= 3 and "reviews" in genres
    alone = {}
    for name, seed in (("own", 1), ("posts", 2), ("third", 3)):
        make_tiny_sentiment(tmp_path / name, seed=seed)
        alone[name] = _scores(Taskflow("sentiment_analysis", task_path=tmp_path / name, return_all_scores=True), texts)
    posts_rows = [k for k, g in enumerate(genres) if g == "posts"]
    sure = alone["posts"].max(axis=1)
    threshold = float(np.median(sure[posts_rows]))      # some posts above it, some below
    assert (sure[posts_rows] >= threshold).any() and (sure[posts_rows] < threshold).any()

    def routed(routes):
        package = _routed(tmp_path / f"routed_{len(list(tmp_path.iterdir()))}", tiny_router, ensemble_mixing="geometric",
                          ensemble_routes=routes)
        make_tiny_sentiment(package / "third", seed=3)
        manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
        manifest["requires"]["third"] = "./third"
        manifest["ensemble"].append("third")
        (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return _scores(Taskflow("sentiment_analysis", task_path=package, return_all_scores=True), texts)

    got = routed([{"weights": [3, 0, 1]}, {"weights": [1, 1, 0], "first": 1, "confident": threshold}])
    for k, genre in enumerate(genres):
        if genre == "reviews":
            expected = mix(np.stack([alone["own"][k], alone["third"][k]]), [0.75, 0.25], "geometric")
        elif sure[k] >= threshold:
            expected = alone["posts"][k]
        else:
            expected = mix(np.stack([alone["own"][k], alone["posts"][k]]), [0.5, 0.5], "geometric")
        assert got[k] == pytest.approx(expected, abs=1e-6), (texts[k], genre)
    # A route of one network is that network; a threshold of 1 never stops the cascade.
    got = routed([{"weights": [0, 0, 1]}, {"weights": [1, 1, 0], "first": 1, "confident": 1.0}])
    for k, genre in enumerate(genres):
        expected = (alone["third"][k] if genre == "reviews" else
                    mix(np.stack([alone["own"][k], alone["posts"][k]]), [0.5, 0.5], "geometric"))
        assert got[k] == pytest.approx(expected, abs=1e-6), texts[k]


def test_a_three_label_package_takes_neutral_from_its_own_network_and_polarity_from_two_label_members(
        tiny_router, tmp_path):
    """neutral=True's composition: the package's own network (three labels) alone says how likely
    "neutral" is; the rest is shared between negative and positive by the route's mix of every
    network's polarity (the own network's renormalised over the two labels)."""
    from make_tiny_models import make_tiny_sentiment
    from taskflow.ensemble import mix

    three = ("negative", "positive", "neutral")
    texts = ["房间很干净，服务也好", "质量很差，用了两天就坏了", "@小明 菜很好吃，下次还来[哈哈]", "客服态度很差[怒]",
             "明天上午九点开会"]
    genres = [r["label"] for r in Taskflow("sentiment_analysis", task_path=tiny_router)(texts)]
    assert set(genres) == {"reviews", "posts"}
    package = tmp_path / "neutral"
    make_tiny_sentiment(package, seed=4, labels=three)
    make_tiny_sentiment(package / "reviews", seed=1)
    make_tiny_sentiment(package / "posts", seed=2)
    shutil.copytree(tiny_router, package / "router")
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest.update({"requires": {"reviews": "./reviews", "posts": "./posts", "router": "./router"},
                     "ensemble": ["reviews", "posts"], "ensemble_router": "router", "ensemble_mixing": "geometric",
                     "ensemble_routes": [{"weights": [1, 3, 0]}, {"weights": [1, 0, 1]}]})
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    flow = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True, neutral=True)
    got = np.array([[r["scores"][label] for label in three] for r in flow(texts)])
    own = Taskflow("sentiment_analysis", task_path=package, return_all_scores=True, ensemble=False, neutral=True)
    own = np.array([[r["scores"][label] for label in three] for r in own(texts)])
    members = {name: _scores(Taskflow("sentiment_analysis", task_path=package / name, return_all_scores=True), texts)
               for name in ("reviews", "posts")}
    for k, genre in enumerate(genres):
        member, weights = (members["reviews"][k], [0.25, 0.75]) if genre == "reviews" else (members["posts"][k], [0.5, 0.5])
        polarity = mix(np.stack([own[k, :2] / own[k, :2].sum(), member]), weights, "geometric")
        assert got[k, 2] == pytest.approx(own[k, 2], abs=1e-6), texts[k]
        assert got[k, :2] == pytest.approx((1 - own[k, 2]) * polarity, abs=1e-6), texts[k]
        assert got[k, :2] != pytest.approx((1 - own[k, 2]) * own[k, :2] / own[k, :2].sum(), abs=1e-4)
    # A route that weighs only networks lacking "neutral" has no one to say it: refused on loading.
    manifest["ensemble_routes"] = [{"weights": [0, 1, 0]}, {"weights": [1, 0, 1]}]
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ManifestError, match="entry 0 weighs only networks that lack"):
        Taskflow("sentiment_analysis", task_path=package, neutral=True)


@pytest.mark.parametrize("fields, message", [
    (dict(ensemble_weights=[1, 1]), "not ensemble_weights"),
    (dict(ensemble_mixing="geometric"), "without ensemble_routes each route is one network"),
    (dict(ensemble_routes=[{"weights": [1, 0]}]), "must have 2 entries"),
    (dict(ensemble_routes=[{"weights": [1, 0]}, {"weights": [0, 0]}]), "positive sum"),
    (dict(ensemble_routes=[{"weights": [1, 0]}, {"weights": [1, -1]}]), "numbers >= 0"),
    (dict(ensemble_routes=[{"weights": [1, 0], "first": 1}, {"weights": [0, 1]}]), "'first' that is not the index"),
    (dict(ensemble_routes=[{"weights": [1, 1], "first": 0, "confident": 1.5}, {"weights": [0, 1]}]),
     "'confident' that is not a probability"),
    (dict(ensemble_router="nobody"), "ensemble_router must name a role of its 'requires'"),
    (dict(ensemble=[]), "needs one member at least"),
])
def test_a_routed_manifest_that_cannot_route_is_refused(tiny_router, tmp_path, fields, message):
    from taskflow.errors import ManifestError

    package = _routed(tmp_path / "routed", tiny_router, **fields)
    with pytest.raises(ManifestError, match=message):
        Taskflow("sentiment_analysis", task_path=package)


def test_a_router_needs_one_label_per_network(tiny_router, tmp_path):
    from taskflow.errors import ManifestError
    from make_tiny_models import make_tiny_sentiment

    package = _routed(tmp_path / "routed", tiny_router)
    make_tiny_sentiment(package / "third", seed=3)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest["requires"]["third"] = "./third"
    manifest["ensemble"].append("third")
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ManifestError, match="has 2 labels; it needs one per network \\(3"):
        Taskflow("sentiment_analysis", task_path=package)
