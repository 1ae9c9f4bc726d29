"""Word polarity from public sentiment lexicons: the words, split into a training half and a held-out
half, sentences the recipe trains on (weak supervision), and the plain-opinion check made from the
held-out words.

    >>> from recipes.sentiment_analysis.lexicon import polar_words, split_words
    >>> words = polar_words()                                      # doctest: +SKIP
    >>> train, held_out = split_words(words)                       # doctest: +SKIP

Sources (``../shared/data/lexicon/sentiment``, research use, see their READMEs): DUTIR's affective
lexicon ontology (polarity 1 / 2 only), Tsinghua's (Li Jun) commendatory and derogatory lists,
HowNet's evaluation and emotion words, NTUSD (simplified).  A word is **polar** when at least
``MIN_SOURCES`` of them list it and none gives it the other polarity; it is **adjectival** (fit for
"subject + 很 + word" and for negation) when DUTIR tags it ``adj`` or HowNet lists it as an
evaluation word, it is two to four Han characters, and it holds no negator (不, 没, 无, 非, 未, 别).

The split is by a hash of the word (``HELD_OUT_SHARE`` of the words, md5, whatever the process),
and a training word that contains a held-out word or is contained in one goes too, so the check
never reads a held-out word inside a trained one.  Words of the robustness suite's vocabulary
(robustness.py ``SUITE_VOCABULARY``) are not trained on either, so the suite's figures stay a
measure of unseen words.

- :func:`training_sentences`: training words in many contexts (reviews' and posts' word order,
  ``SUBJECTS`` of many genres, degree adverbs 很 / 非常 / 太 / 有点 ..., negators 不 / 没有 /
  没有想象中 ...; a negated negative is positive, a negated positive negative), and bare subjects
  (手机, 这家酒店, 客服) labelled ``neutral``, which the recipe trains towards equal probabilities:
  a subject carries no opinion by itself.
- :func:`check_cases`: the plain-opinion check of held-out words, four kinds (``CHECK_KINDS``):
  single words, subject + adjective, degree adverbs, negated forms; labels balanced in each kind.
  The hand-written part is ``dev/plain_opinion.tsv``.  Nothing trains on either: the training
  sentences leave out every check text.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .robustness import NEGATIVE, POSITIVE

ROOT = Path(__file__).resolve().parents[2]
LEXICON_DIR = ROOT.parent / "shared" / "data" / "lexicon" / "sentiment"
HANDWRITTEN = Path(__file__).resolve().parent / "dev" / "plain_opinion.tsv"
MIN_SOURCES = 2
HELD_OUT_SHARE = 0.2
DEV_SHARE = 0.1          # of the words not held out: the plain-opinion dev split's, never trained on
# The check reads everyday words: held-out words of at least this frequency in jieba's dictionary
# (``../shared/data/lexicon/jieba_dict_small``); the training sentences repeat such words thrice.
JIEBA = ROOT.parent / "shared" / "data" / "lexicon" / "jieba_dict_small" / "dict_small.tsv"
COMMON_FREQ = 100
CHECK_KINDS = ("single", "subject", "degree", "negated")
NEUTRAL = "neutral"
_HAN = re.compile(r"^[\u4e00-\u9fff]+$")
_NEGATOR_CHARS = frozenset("不没无非未别莫勿")

# Subjects of the check: 40 everyday things a review or a post is about.
CHECK_SUBJECTS = (
    "手机", "内容", "酒店", "客服", "服务", "质量", "味道", "房间", "这本书", "电影", "这部剧", "老师", "环境",
    "价格", "包装", "物流", "衣服", "鞋子", "屏幕", "电脑", "耳机", "外卖", "菜", "店家", "快递", "司机", "这个app",
    "游戏", "画面", "音乐", "这首歌", "天气", "今天", "心情", "孩子", "同事", "小区", "商场", "这次旅行", "课程",
)
# Subjects the training sentences use: the check's and many more, of reviews' and posts' genres.
TRAIN_SUBJECTS = CHECK_SUBJECTS + (
    "这款手机", "这家店", "这家餐厅", "这个宾馆", "前台", "服务员", "老板", "商家", "卖家", "做工", "材质", "颜色",
    "款式", "尺码", "口感", "分量", "速度", "配送", "送餐员", "电池", "系统", "键盘", "音效", "镜头", "拍照",
    "故事", "剧情", "演员", "主角", "结局", "文笔", "作者", "翻译", "印刷", "纸张", "导演", "节目", "主持人",
    "这个景点", "风景", "门票", "导游", "交通", "位置", "早餐", "床", "空调", "浴室", "设计", "界面", "功能",
    "体验", "效果", "感觉", "生活", "工作", "学校", "食堂", "医院", "医生", "邻居", "室友", "朋友", "老公",
    "宝宝", "这只猫", "这条裙子", "这双鞋", "这件外套", "这个牌子", "这个品牌", "售后", "客户经理", "教练",
    "这节课", "这门课", "考试", "比赛", "球队", "这场比赛", "这个城市", "这条街", "公园", "地铁", "公交",
    "奶茶", "咖啡", "蛋糕", "火锅", "这道菜", "汤", "面条", "水果", "牛奶", "洗发水", "热水器", "平板", "相机",
)
DEGREE = ("很", "非常", "特别", "十分", "真", "太", "挺", "超级", "比较", "相当", "好", "极其", "格外", "蛮")
# Negators whose negation of a positive word is a complaint, and of a negative word praise.
NEGATE_POSITIVE = ("不", "不太", "不够", "不是很", "一点也不", "并不", "没有想象中", "没有想象中那么", "没那么")
NEGATE_NEGATIVE = ("不", "一点也不", "一点都不", "并不", "根本不", "没有想象中", "没有想象中那么", "没那么", "不算", "也不")
# Frames: {s} a subject, {d} a degree adverb, {w} the word.
_SINGLE_FRAMES = ("{w}", "{w}！", "{w}。", "{w}啊", "{w}~")
_SUBJECT_FRAMES = ("{s}{w}", "{s}{w}。", "{s}很{w}", "{s}挺{w}的", "感觉{s}{w}", "{s}真{w}", "{s}真的{w}")
_DEGREE_FRAMES = ("{s}{d}{w}", "{s}{d}{w}！", "{d}{w}了", "{s}{d}{w}了", "{d}{w}", "觉得{s}{d}{w}")
_NEGATED_FRAMES = ("{n}{w}", "{s}{n}{w}", "{s}{n}{w}。", "感觉{s}{n}{w}", "{n}{w}啊")
# Around a training sentence, as reviews and posts put it (no opinion of their own).
_BEFORE = ("", "", "", "收到了，", "用了一周，", "第一次来，", "说实话，", "总的来说，", "今天试了一下，", "看完了，",
           "昨天去了，", "刚到手，", "吃完了，", "住了两晚，", "第二次买了，", "感觉", "个人觉得", "老实说，", "哈哈，",
           "朋友推荐的，", "下班路上，", "周末去的，")
_AFTER = ("", "", "", "。", "！", "~", "！！", "。。", "啊", "呀", "哈哈", "…")


@dataclass(frozen=True)
class Case:
    """One check text: ``kind`` one of CHECK_KINDS (or a hand-written kind), ``word`` the lexicon
    word it was made from ("" for hand-written)."""

    text: str
    label: str
    kind: str
    word: str = ""


def _read(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


@lru_cache(maxsize=2)
def polar_words(lexicon_dir: str | Path = LEXICON_DIR, min_sources: int = MIN_SOURCES) -> dict[str, tuple[str, bool]]:
    """``{word: (polarity, adjectival)}`` of the words at least ``min_sources`` lexicons give one
    polarity and none the other."""
    d = Path(lexicon_dir)
    votes: dict[str, dict[str, set]] = {}
    adjectival: set[str] = set()

    def vote(word: str, polarity: str, source: str) -> None:
        word = word.strip()
        if word and polarity in (POSITIVE, NEGATIVE):
            votes.setdefault(word, {}).setdefault(polarity, set()).add(source)

    for row in _read(d / "dutir_affective_ontology" / "dutir_lexicon.tsv"):
        vote(row["word"], row["polarity"], "dutir")
        if row["pos"] == "adj":
            adjectival.add(row["word"].strip())
    for row in _read(d / "tsinghua_lijun_polarity" / "lexicon.tsv"):
        vote(row["word"], row["polarity"], "tsinghua")
    for row in _read(d / "hownet_sentiment" / "sentiment.tsv"):
        vote(row["word"], row["polarity"], "hownet")
        if row["type"] == "evaluation":
            adjectival.add(row["word"].strip())
    for row in _read(d / "ntusd_simplified" / "lexicon.tsv"):
        vote(row["word"], row["polarity"], "ntusd")
    out = {}
    for word, by in votes.items():
        if len(by) != 1 or not _HAN.match(word) or len(word) > 4:
            continue
        (polarity, sources), = by.items()
        if len(sources) >= min_sources:
            adj = word in adjectival and 2 <= len(word) <= 4 and not (_NEGATOR_CHARS & set(word))
            out[word] = (polarity, adj)
    return out


@lru_cache(maxsize=1)
def frequencies(path: str | Path = JIEBA) -> dict[str, int]:
    """jieba's word frequencies (0 for a word it lacks)."""
    out: dict[str, int] = {}
    for row in _read(Path(path)):
        if (row["freq"] or "").isdigit():
            out[row["term"]] = max(out.get(row["term"], 0), int(row["freq"]))
    return out


def _held_out(word: str, share: float = HELD_OUT_SHARE, salt: str = "") -> bool:
    return int(hashlib.md5((salt + word).encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def _suite_words() -> frozenset[str]:
    from .robustness import SUITE_VOCABULARY

    return frozenset(w for key in ("adjectives", "aspects", "subjects") for w in SUITE_VOCABULARY[key])


@lru_cache(maxsize=2)
def split_words(lexicon_dir: str | Path = LEXICON_DIR) -> tuple[dict[str, tuple[str, bool]], dict[str, tuple[str, bool]]]:
    """(training words, held-out words), each ``{word: (polarity, adjectival)}``."""
    words = polar_words(lexicon_dir)
    held = {w: v for w, v in words.items() if _held_out(w)}
    held_multi = [w for w in held if len(w) >= 2]
    suite = _suite_words()
    train = {}
    for word, value in words.items():
        if word in held or word in suite:
            continue
        if any(h in word or (len(word) >= 2 and word in h) for h in held_multi):
            continue
        train[word] = value
    return train, held


@lru_cache(maxsize=2)
def split_dev_words(lexicon_dir: str | Path = LEXICON_DIR) -> tuple[dict[str, tuple[str, bool]], dict[str, tuple[str, bool]]]:
    """The training words of :func:`split_words` split again: (the words the training sentences
    use, the plain-opinion dev split's words).  ``DEV_SHARE`` of them by another hash of the word,
    and, as for the held-out words, a word that holds a dev word or is held in one is not trained on."""
    train, _ = split_words(lexicon_dir)
    dev = {w: v for w, v in train.items() if _held_out(w, DEV_SHARE, salt="dev:")}
    dev_multi = [w for w in dev if len(w) >= 2]
    kept = {w: v for w, v in train.items()
            if w not in dev and not any(d in w or (len(w) >= 2 and w in d) for d in dev_multi)}
    return kept, dev


def _fill(frame: str, **slots: str) -> str:
    return frame.format(**slots)


def _flip(label: str) -> str:
    return NEGATIVE if label == POSITIVE else POSITIVE


def _negators(polarity: str) -> tuple[str, ...]:
    return NEGATE_POSITIVE if polarity == POSITIVE else NEGATE_NEGATIVE


def _make(word: str, polarity: str, adjectival: bool, kind: str, rng: random.Random, subjects) -> tuple[str, str]:
    """One sentence of ``kind`` for ``word``: (text, label)."""
    s = rng.choice(subjects)
    if kind == "single" or not adjectival:
        return _fill(rng.choice(_SINGLE_FRAMES), w=word), polarity
    if kind == "subject":
        return _fill(rng.choice(_SUBJECT_FRAMES), s=s, w=word), polarity
    if kind == "degree":
        degree = rng.choice(DEGREE + ("有点",) * 3 if polarity == NEGATIVE else DEGREE)
        return _fill(rng.choice(_DEGREE_FRAMES), s=s, d=degree, w=word), polarity
    return _fill(rng.choice(_NEGATED_FRAMES), s=s, n=rng.choice(_negators(polarity)), w=word), _flip(polarity)


def check_cases(per_kind: int = 200, seed: int = 0, lexicon_dir: str | Path = LEXICON_DIR) -> list[Case]:
    """The generated plain-opinion check: ``per_kind`` texts of each of CHECK_KINDS from held-out
    words, half positive and half negative (by the text's label), each text once, from held-out
    words of jieba frequency >= COMMON_FREQ (everyday words); the same arguments give the same cases.  Negated forms and the subject / degree frames use adjectival
    words only."""
    _, held = split_words(lexicon_dir)
    return _cases(held, per_kind, random.Random(f"check:{seed}"))


def dev_cases(per_kind: int = 100, seed: int = 0, lexicon_dir: str | Path = LEXICON_DIR) -> list[Case]:
    """The plain-opinion dev split: made as :func:`check_cases` is, from the dev words of
    :func:`split_dev_words` (words no training sentence uses), for choosing among trainings; the
    check's held-out words stay for the report."""
    _, dev = split_dev_words(lexicon_dir)
    return _cases(dev, per_kind, random.Random(f"dev:{seed}"))


def _cases(words: dict[str, tuple[str, bool]], per_kind: int, rng: random.Random) -> list[Case]:
    freq = frequencies()
    held = {w: v for w, v in words.items() if freq.get(w, 0) >= COMMON_FREQ}
    out = []
    for kind in CHECK_KINDS:
        pool = sorted(w for w, (_, adj) in held.items() if adj or kind == "single")
        rng.shuffle(pool)
        made: dict[str, Case] = {}
        want = {POSITIVE: per_kind // 2, NEGATIVE: per_kind - per_kind // 2}
        for word in pool:
            polarity, adj = held[word]
            text, label = _make(word, polarity, adj, kind, rng, CHECK_SUBJECTS)
            if want[label] > 0 and text not in made:
                made[text] = Case(text, label, kind, word)
                want[label] -= 1
            if not any(want.values()):
                break
        out += made.values()
    return out


def read_handwritten(path: str | Path = HANDWRITTEN) -> list[Case]:
    """The hand-written part of the check: rows ``label<TAB>kind<TAB>text``."""
    return [Case(r["text"], r["label"], r["kind"]) for r in _read(Path(path))]


def training_sentences(count: int, seed: int = 0, bare_subjects: int = 1500,
                       lexicon_dir: str | Path = LEXICON_DIR) -> list[tuple[str, str]]:
    """``count`` labelled sentences from the training words (every word before any repeats, kinds
    mixed, labels balanced; everyday words, COMMON_FREQ, thrice as often), and ``bare_subjects`` bare subjects labelled ``neutral``; none is a
    check text (generated or hand-written)."""
    train, _ = split_dev_words(lexicon_dir)
    freq = frequencies()
    rng = random.Random(f"lexicon:{seed}")
    forbidden = {c.text for c in check_cases(lexicon_dir=lexicon_dir) + dev_cases(lexicon_dir=lexicon_dir)}
    if HANDWRITTEN.is_file():
        forbidden |= {c.text for c in read_handwritten()}
    words = {POSITIVE: sorted(w for w, (p, _) in train.items() if p == POSITIVE),
             NEGATIVE: sorted(w for w, (p, _) in train.items() if p == NEGATIVE)}
    out: dict[str, str] = {}
    kinds = ("single", "subject", "subject", "degree", "degree", "degree", "negated", "negated")
    per_label = count // 2
    for polarity, pool in words.items():
        made = 0
        order: list[str] = []
        while made < per_label and pool:
            if not order:
                order = pool + [w for w in pool if freq.get(w, 0) >= COMMON_FREQ] * 2
                rng.shuffle(order)
            word = order.pop()
            _, adj = train[word]
            text, label = _make(word, polarity, adj, rng.choice(kinds), rng, TRAIN_SUBJECTS)
            text = rng.choice(_BEFORE) + text
            if text[-1] not in "！。~啊了的":
                text += rng.choice(_AFTER)
            if text in forbidden or text in out:
                continue
            out[text] = label
            made += 1
    frames = ("{s}", "{s}。", "关于{s}", "{s}呢", "说说{s}", "{s}怎么样", "{s}的话", "{s}，")
    for _ in range(bare_subjects):
        text = _fill(rng.choice(frames), s=rng.choice(TRAIN_SUBJECTS))
        if text not in forbidden:
            out.setdefault(text, NEUTRAL)
    return list(out.items())
