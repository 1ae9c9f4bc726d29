"""A CheckList-style robustness suite for sentiment: test cases built from templates
written here (and, optionally, real labelled sentences), and a scorer for any ``predict``.

Two sorts of case (Ribeiro et al., *Beyond Accuracy: Behavioral Testing of NLP Models with
CheckList*, ACL 2020):

- **invariance** (``punctuation``, ``whitespace``, ``digits``, ``emoji``, ``year``, ``price``): a
  base sentence and a variant that changes nothing a reader cares about; the predicted label must
  not change (``original`` holds the base).
- **labelled** (``negation``, ``contrast``, ``slang``): sentences whose label a Chinese reader
  agrees on, built compositionally: aspect nouns x adjectives of known polarity x negators, two
  clauses of opposite polarity joined by a contrast connective (the later clause decides), and
  internet slang in neutral carrier sentences.

>>> from taskflow import Taskflow
>>> from recipes.sentiment_analysis.robustness import generate_cases, run_suite
>>> senta = Taskflow("sentiment_analysis")
>>> report = run_suite(lambda texts: [r["label"] for r in senta(texts)], generate_cases())
>>> sorted(report["negation"])
['check', 'failures', 'held', 'n']

Every template sentence is meant to have one label a native reader would give it; where a word
or pattern reads both ways it is left out, and the comment beside it says why.  Fewer clean cases
beat more noisy ones: a suite with wrong gold measures the suite.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from itertools import product
from typing import Callable, Iterable, Sequence

POSITIVE, NEGATIVE = "positive", "negative"
LABELS = (NEGATIVE, POSITIVE)
INVARIANCE_KINDS = ("punctuation", "whitespace", "digits", "emoji", "year", "price")
LABELLED_KINDS = ("negation", "contrast", "slang")
KINDS = INVARIANCE_KINDS + LABELLED_KINDS


@dataclass(frozen=True)
class Case:
    """One test.  Invariance cases carry ``original`` (the base sentence, whose predicted label
    ``text`` must keep) and, when known, ``label``: the base's gold label, used to pick emoji
    that agree with it and reported beside the check.  Labelled cases carry ``label`` only."""

    kind: str
    text: str
    label: str | None = None
    original: str | None = None


# Sentences users reported misread, always in the suite.
REPORTED_CASES = (
    Case("punctuation", "这家店很好！", POSITIVE, "这家店很好"),
    Case("digits", "服务很好40", POSITIVE, "服务很好"),
    Case("digits", "服务很好44", POSITIVE, "服务很好"),
    Case("price", "iPhone 15 Pro售价7999元，比去年贵了500块，性价比太低", NEGATIVE,
         "iPhone 15 Pro比去年贵了500块，性价比太低"),
    Case("negation", "不难吃", POSITIVE),
    Case("negation", "没有想象中差", POSITIVE),
    Case("negation", "不是很好", NEGATIVE),
    Case("contrast", "便宜但是质量差", NEGATIVE),
    Case("contrast", "虽然贵但是很好用", POSITIVE),
    Case("slang", "yyds!!", POSITIVE),
    Case("slang", "这家店的奶茶yyds", POSITIVE),
    Case("slang", "又踩雷了", NEGATIVE),
)


@dataclass(frozen=True)
class _Aspect:
    noun: str
    good: tuple[str, ...]  # adjectives that praise this aspect
    bad: tuple[str, ...]  # adjectives that fault it


# Per domain: prefixes that name what is reviewed ("" = the aspect alone) and aspects whose
# adjectives fit them (物流很好吃 is not a sentence).  Aspects of one domain can share a review,
# which the two-clause templates rely on.
_DOMAINS: dict[str, tuple[tuple[str, ...], tuple[_Aspect, ...]]] = {
    "hotel": (("", "这家酒店的", "酒店的"), (
        _Aspect("房间", ("干净", "宽敞", "安静", "舒服"), ("脏", "小", "吵", "旧")),
        _Aspect("服务", ("好", "周到", "热情"), ("差", "冷淡")),
        _Aspect("早餐", ("丰富", "好吃"), ("难吃", "单调")),
        _Aspect("位置", ("方便", "好"), ("偏",)),
        _Aspect("隔音", ("好",), ("差",)),
        _Aspect("前台", ("热情", "耐心"), ("冷淡",)),
    )),
    "restaurant": (("", "这家店的", "这家餐厅的"), (
        _Aspect("菜", ("好吃", "新鲜"), ("难吃", "油腻", "咸")),
        _Aspect("味道", ("好", "正宗"), ("差",)),
        _Aspect("环境", ("好", "干净"), ("脏", "乱")),
        _Aspect("价格", ("便宜", "实惠", "公道"), ("贵",)),
        _Aspect("上菜", ("快",), ("慢",)),
        _Aspect("分量", ("足",), ("少",)),
        _Aspect("服务员", ("热情", "耐心"), ("冷淡",)),
    )),
    "electronics": (("", "这款手机的", "这台电脑的"), (
        _Aspect("屏幕", ("清晰", "好"), ("模糊", "差")),
        _Aspect("电池", ("耐用",), ()),
        _Aspect("系统", ("流畅", "好用"), ("卡", "难用")),
        _Aspect("质量", ("好",), ("差",)),
        _Aspect("做工", ("精细", "好"), ("粗糙", "差")),
        _Aspect("运行速度", ("快",), ("慢",)),
    )),
    "shopping": (("", "这家店的", "这次的"), (
        _Aspect("物流", ("快",), ("慢",)),
        _Aspect("包装", ("好", "结实"), ("简陋", "差")),
        _Aspect("客服", ("热情", "耐心"), ("冷淡", "差")),
        _Aspect("质量", ("好",), ("差",)),
        _Aspect("价格", ("便宜", "实惠"), ("贵",)),
    )),
    "book": (("", "这本书的"), (
        _Aspect("内容", ("精彩", "充实", "丰富"), ("无聊", "枯燥")),
        _Aspect("故事", ("好看", "感人"), ("无聊",)),
        _Aspect("印刷", ("清晰", "好"), ("模糊", "差")),
        _Aspect("翻译", ("流畅", "好"), ("生硬", "差")),
    )),
}

# Negators before a praising adjective: every one makes a complaint (服务不是很好, 房间一点也不
# 干净, 菜没有想象中那么好吃, 味道不太正宗, 屏幕不清晰).
_NEGATORS_OF_GOOD = ("不", "不是很", "不太", "一点也不", "没有想象中那么")
# ... except 便宜: 价格不便宜 may state a fact and go on to "but worth it".
_NEGATION_OF_GOOD_IS_NOT_A_COMPLAINT = frozenset({"便宜"})
# Before a faulting adjective only the strong or comparative negators make praise (价格一点也不
# 贵, 上菜没有想象中那么慢).  不是很 / 不太 + fault are left out: 菜不是很难吃 is lukewarm at best.
_NEGATORS_OF_BAD = ("一点也不", "没有想象中那么")
# Bare 不 + fault reads as praise only for these (价格不贵, 早餐不难吃, 系统不卡); 房间不脏 or
# 物流不慢 are faint and left out.
_BARE_NOT_PRAISES = frozenset({"难吃", "贵", "吵", "油腻", "卡", "枯燥", "偏"})

# Negation idioms after an aspect noun (服务没得说, 菜不怎么样).  Not in the list: 没什么可说的
# (nothing to praise or nothing to fault, by context).
_NEGATION_IDIOMS = (
    ("还不错", POSITIVE), ("真心不错", POSITIVE), ("没得说", POSITIVE), ("挑不出毛病", POSITIVE),
    ("无可挑剔", POSITIVE), ("没毛病", POSITIVE),
    ("不怎么样", NEGATIVE), ("不咋地", NEGATIVE), ("实在不敢恭维", NEGATIVE), ("不行", NEGATIVE),
)
_IDIOM_ASPECTS = ("服务", "味道", "环境", "质量", "房间", "物流", "做工", "菜", "早餐", "客服")

# Negated verbs about a whole place or product.
_ENTITIES = ("这家店", "这家酒店", "这家餐厅", "这款手机", "这本书", "这家民宿")
_NEGATED_VERBS = (
    ("不推荐{e}", NEGATIVE), ("不喜欢{e}", NEGATIVE), ("对{e}不满意", NEGATIVE),
    ("对{e}一点也不满意", NEGATIVE), ("不会再选{e}了", NEGATIVE),
    ("{e}没有让我失望", POSITIVE), ("{e}一点也不让人失望", POSITIVE), ("选{e}不后悔", POSITIVE),
    ("选了{e}，一点也不后悔", POSITIVE),
)
# Negation that is not a negation of the judgement (不得不说 is a discourse marker) or a double one.
_NEGATION_HANDWRITTEN = (
    ("不得不说，这家店的菜很好吃", POSITIVE), ("不得不说，服务真的很周到", POSITIVE),
    ("这家店没有一道菜不好吃", POSITIVE), ("没有一个地方不满意", POSITIVE),
    ("不得不说，质量太差了", NEGATIVE), ("不得不说，房间太吵了", NEGATIVE),
    ("没有一道菜是好吃的", NEGATIVE), ("没有一点值得推荐的地方", NEGATIVE),
)

# Contrast: the clause after the connective decides, when it is the stronger one.  The conceded
# clause is mild (还算/挺…的 for praise, 有点 for a fault) and the decisive one strong (非常, 特别,
# 太…了) or a verdict, so the gold does not hang on the connective alone.  不过 appears only after
# 虽然: "A，不过B" without it often adds a small aside to a verdict already given.  就是 is left
# out: "房间很干净，就是有点小" is praise with a reservation, the earlier clause decides.
_MILD_FRAMES = {POSITIVE: ("{s}还算{x}", "{s}挺{x}的"), NEGATIVE: ("{s}有点{x}",)}   # the conceded clause
_STRONG_FRAMES = {POSITIVE: ("{s}非常{x}", "{s}特别{x}"), NEGATIVE: ("{s}太{x}了", "{s}特别{x}")}   # the decisive one
_CONNECTIVES_AFTER_SUIRAN = ("但是", "可是", "不过")
_CONNECTIVES_ALONE = ("但是", "可是")
_VERDICTS = {
    POSITIVE: ("总体还是很满意", "还是值得推荐的", "下次还会再来"),
    NEGATIVE: ("再也不会来了", "体验太差了", "太失望了"),
}
_VERDICT_DOMAINS = {"hotel", "restaurant"}  # 下次还会再来 / 再也不会来了 fit places, not products
_CONTRAST_HANDWRITTEN = (
    ("便宜但是质量差", NEGATIVE), ("虽然贵但是很好用", POSITIVE), ("价格便宜，可是质量太差了", NEGATIVE),
    ("虽然贵了点，不过质量非常好", POSITIVE), ("虽然便宜，但是太难用了", NEGATIVE),
    ("虽然等了很久，但是菜非常好吃", POSITIVE), ("看着挺好看的，可是用了两天就坏了", NEGATIVE),
)

# Slang.  Carrier sentences say nothing else evaluative, so the slang alone carries the label.
# Items by sort, because frames fit some sorts only (买这家店 is not Chinese).
_ITEMS = {
    "food": ("奶茶", "这家店的奶茶", "这份外卖", "他家的烤鱼", "这个蛋糕", "炸鸡", "这杯咖啡"),
    "consumable": ("这款面膜", "这支口红", "这款洗发水"),
    "durable": ("这个耳机", "这双鞋", "这款手机"),
    "place": ("这家店", "这家民宿", "这家餐厅", "这家酒店"),
}
_BOUGHT = ("food", "consumable", "durable")
_ANY = _BOUGHT + ("place",)
_SHOPS = ("小店", "餐厅", "民宿", "奶茶店", "咖啡馆")
# (frame, sorts of item it takes, label).  Left out, because they read both ways:
# 拔草 (to finally go and try a thing one was 种草'd on, or to be talked out of wanting it);
# 绝了 (awe, or sarcasm: 这服务也是绝了); 离谱 (好吃到离谱 vs 贵得离谱); 上头 (addictive, or
# losing one's head); 破防 (moved, or hurt); 666 (often sarcastic).
_SLANG = (
    ("{item}yyds", _ANY, POSITIVE),
    ("{item}真的yyds", _ANY, POSITIVE),
    ("{item}YYDS!!", _BOUGHT, POSITIVE),
    ("{item}，永远的神", _ANY, POSITIVE),
    ("{item}绝绝子", _ANY, POSITIVE),
    ("{item}也太绝绝子了吧", _BOUGHT, POSITIVE),
    ("{item}直接封神", _ANY, POSITIVE),
    ("{item}可以封神了", _BOUGHT, POSITIVE),
    ("{item}，爱了爱了", _ANY, POSITIVE),
    ("{item}简直是宝藏", _ANY, POSITIVE),
    ("发现一家宝藏{shop}", ("shop",), POSITIVE),
    ("被{item}种草了", _ANY, POSITIVE),
    ("{item}已种草", _BOUGHT, POSITIVE),
    ("{item}真香", _BOUGHT, POSITIVE),
    ("{item}无限回购", ("food", "consumable"), POSITIVE),  # one buys again what gets used up
    ("{item}踩雷了", _ANY, NEGATIVE),
    ("买{item}又踩雷了", _BOUGHT, NEGATIVE),
    ("{item}请避雷", _ANY, NEGATIVE),
    ("大家避雷{item}", _ANY, NEGATIVE),
    ("{item}翻车了", _BOUGHT, NEGATIVE),
    ("{item}太拉胯了", _ANY, NEGATIVE),
    ("{item}真拉胯", _ANY, NEGATIVE),
    ("买了{item}，真的会谢", _BOUGHT, NEGATIVE),
    ("{item}，真的会谢", _ANY, NEGATIVE),
    ("{item}，无语", _ANY, NEGATIVE),
    ("{item}真让人无语", _ANY, NEGATIVE),
    ("{item}纯纯智商税", _BOUGHT, NEGATIVE),
    ("{item}直接劝退", _ANY, NEGATIVE),
    ("{item}太下头了", _ANY, NEGATIVE),
    ("买{item}血亏", _BOUGHT, NEGATIVE),
)

# Base sentences for the invariances, beside the templated ones.
_BASE_HANDWRITTEN = (
    ("这家店很好", POSITIVE), ("服务很好", POSITIVE), ("物流很快，包装也很好，满意", POSITIVE),
    ("酒店位置很好，出门就是地铁站", POSITIVE), ("菜很好吃，下次还来", POSITIVE),
    ("性价比很高，推荐购买", POSITIVE), ("这本书写得很好，值得一读", POSITIVE),
    ("手机用着很流畅，电池也耐用", POSITIVE), ("老板人很好，菜量也足", POSITIVE),
    ("早餐很丰富，房间也干净", POSITIVE),
    ("服务太差了", NEGATIVE), ("菜太难吃了，再也不来了", NEGATIVE), ("物流太慢了，等了一个星期", NEGATIVE),
    ("房间又脏又吵，不推荐", NEGATIVE), ("质量很差，用了两天就坏了", NEGATIVE),
    ("客服态度很差，问题一直没解决", NEGATIVE), ("等了一个小时还没上菜", NEGATIVE),
    ("这本书太无聊了，看不下去", NEGATIVE), ("性价比太低了", NEGATIVE), ("屏幕有坏点，太失望了", NEGATIVE),
)

# Trailing marks that keep a statement a statement.  ？ is left out: it can turn praise into a
# rhetorical question (服务很好？).
_TRAILING_MARKS = ("！", "。", "~", "!!", "…", "！！！")
_SENTENCE_END = "。！!？?~～….，, "
# Emoji that agree with the base's label.  An emoji carries sentiment of its own, so a "neutral"
# one is hard to find; 😂 is left out (wry laughter in complaints: 又踩雷了😂) and so is 🙂 (on
# the Chinese internet the smile reads as sarcasm or contempt).  Bases without a known label get
# no emoji case.
_EMOJI = {POSITIVE: ("😊", "👍", "😄", "🥰", "❤️", "💯"), NEGATIVE: ("😡", "👎", "😞", "😤", "😠", "💔")}
_PRICES = ("9.9", "19", "39", "59", "99", "128", "199", "299", "499", "999", "1999", "7999")


# Statements with no opinion in them (a text with no opinion should not read 0.99):
# a colour, a page count, where a place is, when or where a thing was bought.  A binary model
# still gives them a label; what the suite checks is that it is not sure of it (top probability at
# most NO_OPINION_CEILING).  Each frame states a fact a reviewer could mention either way: 离地铁近
# (convenient), 很重 or 刚到 (fast delivery) carry a judgement and are left out.
NO_OPINION_CEILING = 0.75
_FACT_FRAMES = {
    "book": ("{t}有三百页", "{t}有五百多页", "{t}是2018年出版的", "{t}是英文版的", "{t}一共十二章",
             "{t}是上个月买的", "{t}是朋友送的"),
    "product": ("{t}是黑色的", "{t}是银色的", "{t}是上个月买的", "{t}是朋友送的", "{t}是在网上买的",
                "{t}是2021年出的"),
    "place": ("{t}在人民路上", "{t}在二楼", "{t}早上九点开门", "{t}周一休息", "我们是周五去的{t}",
              "{t}有两层"),
}
_FACT_SUBJECTS = {"book": ("这本书",), "product": ("这款手机", "手机", "这台电脑"),
                  "place": ("这家店", "这家酒店", "这家餐厅", "这家民宿")}


def frame_shape(frame: str) -> str:
    """A template with its slots made alike ("{item}太拉胯了" -> "{}太拉胯了"), so that frames written
    with different slot names compare equal."""
    return re.sub(r"\{\w*\}", "{}", frame)


# The held-out split.  Training sentences are generated (augment.py) from a vocabulary
# of its own, TRAIN_VOCABULARY, which shares no string with this one (tests/test_sentiment.py
# asserts it), so the negation and contrast figures measure the constructions (不 / 一点也不 /
# 不是很 ..., 虽然…但是 ...) on aspects, adjectives, subjects and frames that no generated training
# sentence used.  Negators and connectives are the constructions themselves and are shared.
# Slang words are shared too (a word unseen in training cannot be learnt from other words'
# characters): the slang figure measures known slang in frames and items not trained on.
SUITE_VOCABULARY: dict[str, frozenset[str]] = {
    "aspects": frozenset([a.noun for _, aspects in _DOMAINS.values() for a in aspects] + list(_IDIOM_ASPECTS)),
    "adjectives": frozenset(adjective for _, aspects in _DOMAINS.values() for a in aspects for adjective in a.good + a.bad),
    "subjects": frozenset([p for prefixes, _ in _DOMAINS.values() for p in prefixes if p] + list(_ENTITIES)
                          + [item for items in _ITEMS.values() for item in items] + list(_SHOPS)
                          + [subject for subjects in _FACT_SUBJECTS.values() for subject in subjects]),
    "negation_frames": frozenset([frame_shape(frame) for frame, _ in _NEGATED_VERBS]
                                 + ["{}" + idiom for idiom, _ in _NEGATION_IDIOMS]),
    "contrast_frames": frozenset([frame_shape(f) for frames in (_MILD_FRAMES, _STRONG_FRAMES) for fs in frames.values()
                                  for f in fs] + [v for verdicts in _VERDICTS.values() for v in verdicts]),
    "slang_frames": frozenset(frame_shape(frame) for frame, _, _ in _SLANG),
    "emoji": frozenset(e for emoji in _EMOJI.values() for e in emoji),
    "fact_frames": frozenset(f for frames in _FACT_FRAMES.values() for f in frames),
}


def generate_cases(real: Iterable[tuple[str, str]] = (), *, seed: int = 0,
                   per_kind: int | None = 300) -> list[Case]:
    """The suite: ``per_kind`` cases of each kind (all of them with ``per_kind=None``), the reported
    sentences always among them; the same arguments give the same cases.

    ``real``: ``(text, label)`` pairs of real sentences (say, dev reviews the model gets right);
    the invariances then run on them as well as on template sentences, half and half.  Labels are
    ``"positive"`` / ``"negative"``.

    >>> cases = generate_cases()
    >>> [c for c in cases if c.text == "不难吃"]
    [Case(kind='negation', text='不难吃', label='positive', original=None)]
    """
    fixed_per_kind = max(Counter(c.kind for c in REPORTED_CASES).values())
    if per_kind is not None and per_kind < fixed_per_kind:
        raise ValueError(f"per_kind must be at least {fixed_per_kind} (the reported sentences), got {per_kind}")
    real = [(text, label) for text, label in real]
    for text, label in real:
        if label not in LABELS:
            raise ValueError(f"real sentence {text!r} has label {label!r}; labels are {LABELS}")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"real sentences must be non-empty str, got {text!r}")
    labelled = {"negation": _negation_cases(), "contrast": _contrast_cases(), "slang": _slang_cases()}
    _unique([c for kind in LABELLED_KINDS for c in labelled[kind]] + [c for c in REPORTED_CASES if c.original is None])
    cases = []
    for kind in KINDS:
        rng = random.Random(f"{seed}:{kind}")  # a str seed is hashed stably, whatever PYTHONHASHSEED
        fixed = [c for c in REPORTED_CASES if c.kind == kind]
        if kind in INVARIANCE_KINDS:
            cases += fixed + _invariance_cases(kind, real, rng, None if per_kind is None else per_kind - len(fixed))
        else:
            pool = [c for c in labelled[kind] if c.text not in {f.text for f in fixed}]
            cases += fixed + _balanced_sample(pool, None if per_kind is None else per_kind - len(fixed), rng)
    return cases


def run_suite(predict: Callable[[list[str]], Sequence[str]], cases: Sequence[Case], *,
              examples: int = 3) -> dict[str, dict]:
    """Score ``predict`` (a list of texts in, one label per text out) on ``cases``.

    Per kind: ``check`` ("invariance" or "label"), ``n``, ``held`` (the share of cases that hold:
    the label of ``text`` equals that of ``original``, or equals the gold label) and up to
    ``examples`` failing cases, in case order.  Texts are predicted once each, in one call.
    """
    texts = list(dict.fromkeys(t for c in cases for t in (c.text, c.original) if t is not None))
    predicted = list(predict(texts)) if texts else []
    if len(predicted) != len(texts):
        raise ValueError(f"predict returned {len(predicted)} labels for {len(texts)} texts; it must return one per text")
    label_of = dict(zip(texts, predicted))
    report: dict[str, dict] = {}
    unknown = sorted({c.kind for c in cases} - set(KINDS))
    if unknown:
        raise ValueError(f"unknown case kinds {unknown}; kinds are {KINDS}")
    for kind in [k for k in KINDS if any(c.kind == k for c in cases)]:
        held, failures = 0, []
        for case in (c for c in cases if c.kind == kind):
            if case.original is not None:
                ok = label_of[case.text] == label_of[case.original]
                failure = {"text": case.text, "predicted": label_of[case.text],
                           "original": case.original, "original_predicted": label_of[case.original]}
            else:
                ok = label_of[case.text] == case.label
                failure = {"text": case.text, "predicted": label_of[case.text], "expected": case.label}
            held += ok
            if not ok and len(failures) < examples:
                failures.append(failure)
        n = sum(c.kind == kind for c in cases)
        check = "invariance" if kind in INVARIANCE_KINDS else "label"
        report[kind] = {"check": check, "n": n, "held": held / n, "failures": failures}
    return report


def no_opinion_sentences() -> list[str]:
    """Every statement of fact the suite tests for "no opinion", in a fixed order
    (这本书有三百页, 手机是黑色的, ...)."""
    return list(dict.fromkeys(frame.format(t=subject) for sort, frames in _FACT_FRAMES.items()
                              for subject in _FACT_SUBJECTS[sort] for frame in frames))


def run_no_opinion(confidence: Callable[[list[str]], Sequence[float]], texts: Sequence[str] | None = None, *,
                   ceiling: float = NO_OPINION_CEILING, examples: int = 3) -> dict:
    """Score ``confidence`` (texts in, each text's top label probability out) on statements with no
    opinion (``no_opinion_sentences()`` unless ``texts``): ``n``, ``held`` (the share read with
    a top probability of at most ``ceiling``), ``mean_confidence`` and up to ``examples`` of the
    most confident texts."""
    texts = list(no_opinion_sentences() if texts is None else texts)
    said = [float(p) for p in confidence(texts)]
    if len(said) != len(texts):
        raise ValueError(f"confidence returned {len(said)} values for {len(texts)} texts; it must return one per text")
    worst = sorted(zip(said, texts), reverse=True)[:examples]
    return {"check": f"top probability <= {ceiling}", "n": len(texts),
            "held": sum(p <= ceiling for p in said) / len(texts), "mean_confidence": sum(said) / len(texts),
            "failures": [{"text": t, "confidence": round(p, 3)} for p, t in worst if p > ceiling]}


# --- labelled cases ------------------------------------------------------------------------------

def _negation_cases() -> list[Case]:
    out = []
    for prefixes, aspects in _DOMAINS.values():
        for prefix, aspect in product(prefixes, aspects):
            subject = prefix + aspect.noun
            praise = [a for a in aspect.good if a not in _NEGATION_OF_GOOD_IS_NOT_A_COMPLAINT]
            for negator, adjective in product(_NEGATORS_OF_GOOD, praise):
                out.append(Case("negation", subject + negator + adjective, NEGATIVE))
            for adjective in aspect.bad:
                negators = _NEGATORS_OF_BAD + (("不",) if adjective in _BARE_NOT_PRAISES else ())
                out += [Case("negation", subject + negator + adjective, POSITIVE) for negator in negators]
    out += [Case("negation", aspect + idiom, label) for aspect, (idiom, label) in product(_IDIOM_ASPECTS, _NEGATION_IDIOMS)]
    out += [Case("negation", frame.format(e=entity), label) for (frame, label), entity in product(_NEGATED_VERBS, _ENTITIES)]
    out += [Case("negation", text, label) for text, label in _NEGATION_HANDWRITTEN]
    return _unique(out)


def _mild(aspect: str, adjective: str, polarity: str) -> list[str]:
    return [frame.format(s=aspect, x=adjective) for frame in _MILD_FRAMES[polarity]]


def _strong(aspect: str, adjective: str, polarity: str) -> list[str]:
    return [frame.format(s=aspect, x=adjective) for frame in _STRONG_FRAMES[polarity]]


def _contrast_cases() -> list[Case]:
    out = []
    for domain, (prefixes, aspects) in _DOMAINS.items():
        for first, second in product(aspects, aspects):
            if first.noun == second.noun:
                continue
            for decided in LABELS:
                conceded = POSITIVE if decided == NEGATIVE else NEGATIVE
                first_adjectives = first.good if conceded == POSITIVE else first.bad
                second_adjectives = second.good if decided == POSITIVE else second.bad
                for a1, a2 in product(first_adjectives, second_adjectives):
                    for c1, c2 in product(_mild(prefixes[1] + first.noun, a1, conceded), _strong(second.noun, a2, decided)):
                        out += [Case("contrast", f"虽然{c1}，{k}{c2}", decided) for k in _CONNECTIVES_AFTER_SUIRAN]
                        out += [Case("contrast", f"{c1}，{k}{c2}", decided) for k in _CONNECTIVES_ALONE]
        if domain in _VERDICT_DOMAINS:
            for aspect, decided in product(aspects, LABELS):
                conceded = POSITIVE if decided == NEGATIVE else NEGATIVE
                for adjective in aspect.good if conceded == POSITIVE else aspect.bad:
                    for c1, verdict in product(_mild(aspect.noun, adjective, conceded), _VERDICTS[decided]):
                        out += [Case("contrast", f"虽然{c1}，{k}{verdict}", decided) for k in _CONNECTIVES_AFTER_SUIRAN]
    out += [Case("contrast", text, label) for text, label in _CONTRAST_HANDWRITTEN]
    return _unique(out)


def _slang_cases() -> list[Case]:
    out = []
    for frame, sorts, label in _SLANG:
        if sorts == ("shop",):
            out += [Case("slang", frame.format(shop=shop), label) for shop in _SHOPS]
        else:
            out += [Case("slang", frame.format(item=item), label) for sort in sorts for item in _ITEMS[sort]]
    return _unique(out)


# --- invariances ---------------------------------------------------------------------------------

def _template_bases() -> list[tuple[str, str]]:
    bases = list(_BASE_HANDWRITTEN)
    for prefixes, aspects in _DOMAINS.values():
        for prefix, aspect in product(prefixes, aspects):
            for adjective in aspect.good:
                bases += [(f"{prefix}{aspect.noun}{degree}{adjective}", POSITIVE) for degree in ("很", "非常", "特别")]
            for adjective in aspect.bad:
                bases += [(f"{prefix}{aspect.noun}很{adjective}", NEGATIVE), (f"{prefix}{aspect.noun}太{adjective}了", NEGATIVE)]
        # two clauses of one polarity, for perturbations inside a text
        for first, second in product(aspects, aspects):
            if first.noun != second.noun:
                bases += [(f"{prefixes[1]}{first.noun}很{a1}，{second.noun}也很{a2}", POSITIVE)
                          for a1, a2 in product(first.good, second.good)]
                bases += [(f"{prefixes[1]}{first.noun}很{a1}，{second.noun}也很{a2}", NEGATIVE)
                          for a1, a2 in product(first.bad, second.bad)]
    return list(dict.fromkeys(bases))


def _invariance_cases(kind: str, real: list[tuple[str, str]], rng: random.Random, count: int | None) -> list[Case]:
    templates = _template_bases()
    if count is None:
        chosen = templates + real
    else:
        from_real = min(len(real), count // 2)
        chosen = _balanced_bases(templates, count - from_real, rng) + _balanced_bases(real, from_real, rng)
    perturb = _PERTURBATIONS[kind]
    cases = []
    for text, label in chosen:
        variant = perturb(text, label, rng)
        if variant is not None and variant != text:
            cases.append(Case(kind, variant, label, text))
    return cases


def _strip_end(text: str) -> str:
    return text.rstrip(_SENTENCE_END)


def _first_clause_end(text: str) -> int | None:
    """Index just after the first clause of a text with more than one (before its ，/。)."""
    for i, ch in enumerate(text[:-1]):
        if ch in "，。！；,;!" and i > 0:
            return i
    return None


def _punctuation(text: str, label: str, rng: random.Random) -> str:
    mark = rng.choice(_TRAILING_MARKS)
    if _strip_end(text) + mark == text:
        mark = _TRAILING_MARKS[(_TRAILING_MARKS.index(mark) + 1) % len(_TRAILING_MARKS)]
    return _strip_end(text) + mark


def _whitespace(text: str, label: str, rng: random.Random) -> str:
    way = rng.randrange(3)
    if way == 0:  # spaces after each comma and at both ends
        return "  " + text.replace("，", "， ").replace(",", ", ") + " "
    if way == 1 and len(text) > 2:  # a stray space (or two) between two characters
        at = rng.randrange(1, len(text) - 1)
        return text[:at] + rng.choice((" ", "  ")) + text[at:]
    return text + rng.choice(("  ", " \u3000"))  # trailing half- and full-width spaces


def _digits(text: str, label: str, rng: random.Random) -> str:
    number = str(rng.choice((rng.randrange(1, 10), rng.randrange(10, 100), rng.randrange(100, 1000))))
    way, cut = rng.randrange(3), _first_clause_end(text)
    if way == 1 and cut is not None:  # after the first clause: 房间很干净12，服务也好
        return text[:cut] + number + text[cut:]
    if way == 2:  # a list number, as reviews written in points have
        return f"{rng.randrange(1, 4)}、{text}"
    return text + number  # 服务很好40


def _emoji(text: str, label: str, rng: random.Random) -> str | None:
    if label not in _EMOJI:
        return None
    emoji, cut = rng.choice(_EMOJI[label]), _first_clause_end(text)
    if cut is not None and rng.random() < 0.3:
        return text[:cut] + emoji + text[cut:]
    return text + emoji * rng.choice((1, 1, 2, 3))


def _year(text: str, label: str, rng: random.Random) -> str:
    year, month = rng.randrange(2015, 2025), rng.randrange(1, 13)
    return rng.choice((f"{year}年，{text}", f"{year}年{month}月，{text}", f"{text}（{year}年{month}月）"))


def _price(text: str, label: str, rng: random.Random) -> str:
    price = rng.choice(_PRICES)
    return rng.choice((f"售价{price}元，{text}", f"{text}（价格{price}元）", f"订单金额{price}元，{text}"))


_PERTURBATIONS: dict[str, Callable[[str, str, random.Random], str | None]] = {
    "punctuation": _punctuation, "whitespace": _whitespace, "digits": _digits,
    "emoji": _emoji, "year": _year, "price": _price,
}


# --- helpers -------------------------------------------------------------------------------------

def _unique(cases: list[Case]) -> list[Case]:
    """Each text once, first occurrence kept; two templates that give one text both labels are a
    bug in the templates (not user input), so it stops here."""
    seen: dict[str, Case] = {}
    for case in cases:
        if seen.setdefault(case.text, case).label != case.label:
            raise AssertionError(f"templates give {case.text!r} both labels")
    return list(seen.values())


def _balanced_bases(bases: list[tuple[str, str]], count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` (text, label) bases, half of each label where the list allows, in list order."""
    chosen = _balanced_sample([Case("", text, label) for text, label in bases], count, rng)
    return [(c.text, c.label) for c in chosen]


def _balanced_sample(pool: list[Case], count: int | None, rng: random.Random) -> list[Case]:
    """``count`` cases, half of each label where the pool allows, in pool order."""
    if count is None or count >= len(pool):
        return pool
    positive = [i for i, c in enumerate(pool) if c.label == POSITIVE]
    negative = [i for i, c in enumerate(pool) if c.label == NEGATIVE]
    take_positive = min(len(positive), count // 2)
    take_negative = min(len(negative), count - take_positive)
    take_positive = min(len(positive), count - take_negative)
    chosen = set(rng.sample(positive, take_positive)) | set(rng.sample(negative, take_negative))
    return [pool[i] for i in sorted(chosen)]
