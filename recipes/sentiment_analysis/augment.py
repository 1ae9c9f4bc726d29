"""Labelled training sentences for sentiment: copies of training sentences that change
nothing a reader cares about, and sentences built from templates for the constructions the char
model misreads (negation, contrast, internet slang).

>>> from recipes.sentiment_analysis.augment import generate, negation_sentences
>>> made = generate(["房间很干净，服务也好", "等了一个小时还没上菜"] * 10, ["positive", "negative"] * 10, seed=1)
>>> sorted({g.kind for g in made})
['contrast', 'invariance', 'negation', 'no_opinion', 'slang']
>>> dict(negation_sentences())["汤一点也不腥"]
'positive'

Five kinds (``KINDS``), the first four labelled positive / negative:

- **invariance**: a share of the training sentences with trailing punctuation, spaces, a number,
  an emoji that agrees with the label, a year or a price added; same label;
- **negation**: aspect x adjective x negator, with the label the negation gives (汤一点也不腥 is
  praise, 面料不够柔软 a complaint; comparative negators too: 汤没想象中那么鲜美, 房间没有预想中那么
  潮湿), and without a subject, as short reviews say it (一点也不腥, 没想象中那么拖沓); negation
  idioms (没话说, 不靠谱); 没有 + a defect or a merit (一点异味都没有, 一点效果都没有); negated verbs
  (不值这个价, 买这件外套不亏);
- **contrast**: a mild clause conceded and a strong one of the other polarity after the
  connective (虽然床稍微有点硬，但是态度十分友好), which decides; and two real training sentences of
  opposite labels joined by a connective, labelled as the second;
- **slang**: internet slang (yyds, 绝绝子, 踩雷, 拉胯, 智商税 ...) in carrier sentences, and after
  real training sentences whose label it agrees with.
- **no_opinion**: statements of fact (这件衣服是白色的, 这部小说有四百页左右) and, when the
  caller passes ``statements``, real sentences without an opinion, labelled ``NEUTRAL``: the
  recipe trains them towards equal probabilities (outlier exposure), so that a statement of fact
  is not read as sure praise or a sure complaint.

Held out: every template word and frame here comes from ``TRAIN_VOCABULARY``, which shares no
string with the robustness suite's ``SUITE_VOCABULARY`` (robustness.py; a test asserts it), and
:func:`generate` refuses to make a sentence the suite tests.  The suite's negation and contrast
figures therefore measure the constructions on words no generated sentence used.  Negators and
connectives (不, 一点也不, 不是很, 但是, 可是, 不过) are the constructions and are shared; so is the
slang lexicon (a slang word cannot be learnt from other words' characters): the suite's slang
figure is known slang in unseen frames and items, not unseen slang.

Only pass training sentences: nothing here reads a dev or test split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Iterable, Sequence

from taskflow.tasks.sentiment_analysis import normalize

from .robustness import (LABELS, NEGATIVE, POSITIVE, REPORTED_CASES, _first_clause_end, frame_shape,
                         generate_cases, no_opinion_sentences)

__all__ = ["KINDS", "NEUTRAL", "SIZES", "TRAIN_VOCABULARY", "Generated", "generate", "negation_sentences",
           "bare_negation_sentences",
           "contrast_sentences", "slang_sentences", "fact_sentences", "opinion_free"]

KINDS = ("invariance", "negation", "contrast", "slang", "no_opinion")
# The label of a no_opinion sentence: not a model label; the recipe trains it towards equal
# probabilities of both (outlier exposure: Hendrycks et al., *Deep Anomaly Detection with Outlier
# Exposure*, ICLR 2019), so that a statement of fact does not read 0.99 either way.
NEUTRAL = "neutral"

# How many sentences of each part generate() makes at scale 1: about a fifth of the 61,708
# training texts in all, so that real reviews stay the bulk of what the model learns from.
# Template parts are sampled without repeats from their pools (a pool smaller than its size is
# taken whole).
SIZES = {
    "invariance": 0.10,        # share of the training sentences copied with one perturbation
    "negation": 4000,          # templates: about three quarters of the pool
    "negation_bare": 600,      # templates without a subject (一点也不腥): about three quarters of the pool
    "contrast": 2000,          # templates
    "contrast_real": 2000,     # real sentence + connective + real sentence of the other label
    "slang": 500,              # templates: the whole pool (482 sentences)
    "slang_real": 1500,        # slang after a real sentence of its label
    "no_opinion": 600,         # templates: the whole pool
    "no_opinion_real": 3000,   # opinion-free real sentences (``statements``) train.py reads by default
}


@dataclass(frozen=True)
class Generated:
    """One generated training sentence: ``source`` is "template" (made from TRAIN_VOCABULARY)
    or "real" (a training sentence changed, or two joined)."""

    text: str
    label: str
    kind: str
    source: str


@dataclass(frozen=True)
class _Aspect:
    noun: str
    good: tuple[str, ...]  # adjectives that praise it
    bad: tuple[str, ...]   # adjectives that fault it


@dataclass(frozen=True)
class _Domain:
    kind: str                     # "place", "food" or "product": which verbs and verdicts fit
    prefixes: tuple[str, ...]     # what is reviewed, before an aspect ("" = the aspect alone)
    entities: tuple[str, ...]     # the whole thing reviewed, for verbs and 没有 frames
    aspects: tuple[_Aspect, ...]
    defects: tuple[str, ...]      # 没有 + one of these is praise (一点异味都没有)
    merits: tuple[str, ...]       # 没有 + one of these is a complaint (一点效果都没有)


# The training half of the vocabulary: the domains of the training data (hotels, take-away,
# electronics, clothes, fruit, cosmetics, books), with aspects and adjectives the suite does not
# use.  Every word was picked for one reading in its aspect; the comments say what was left out.
_DOMAINS = (
    _Domain("place", ("", "这个酒店的", "宾馆的"), ("这个酒店", "这家宾馆"), (
        _Aspect("床", ("舒适", "柔软"), ("硬", "窄")),
        _Aspect("卫生间", ("整洁", "明亮"), ("潮湿", "破旧")),
        _Aspect("设施", ("齐全", "新"), ("陈旧",)),
        _Aspect("停车", ("便利",), ("困难",)),
        _Aspect("大堂", ("气派", "豪华"), ("拥挤",)),
        _Aspect("态度", ("友好", "和蔼"), ("恶劣", "傲慢", "粗鲁")),
    ), ("异味", "霉味", "蟑螂"), ("热水", "窗户")),
    _Domain("food", ("", "这家外卖的", "他家的"), ("这家外卖", "这份盒饭"), (
        _Aspect("汤", ("鲜美", "浓郁"), ("寡淡", "腥")),
        _Aspect("肉", ("嫩", "香"), ("柴", "硬")),
        _Aspect("米饭", ("香", "软糯"), ("夹生", "硬")),
        _Aspect("送餐", ("准时", "迅速", "及时"), ("拖拉", "迟缓")),
        _Aspect("口味", ("地道", "可口"), ("奇怪",)),
        _Aspect("饮料", ("冰爽", "可口"), ("难喝",)),
        _Aspect("性价比", ("高",), ("低",)),
        _Aspect("餐具", ("齐全", "卫生"), ()),
    ), ("异物", "怪味"), ("餐具", "筷子", "肉")),
    _Domain("product", ("", "这个平板的", "这台笔记本的"), ("这个平板", "这台笔记本"), (
        _Aspect("音质", ("饱满", "清澈"), ("沙哑", "刺耳")),
        _Aspect("信号", ("稳定", "强"), ("弱",)),
        _Aspect("散热", ("出色",), ("糟糕",)),
        _Aspect("外观", ("漂亮", "时尚", "大气"), ("土气", "难看")),
        _Aspect("手感", ("细腻", "顺滑"), ("廉价",)),
        _Aspect("续航", ("持久",), ("短",)),
        _Aspect("触屏", ("灵敏",), ("迟钝",)),
        _Aspect("充电", ("迅速",), ("缓慢",)),
    ), ("划痕", "坏点", "杂音"), ("售后", "声音")),
    _Domain("product", ("", "这件衣服的", "这条裤子的"), ("这件衣服", "这条裤子", "这件外套"), (
        _Aspect("面料", ("柔软", "透气", "舒适"), ("劣质", "扎人")),
        _Aspect("版型", ("修身", "大方"), ("臃肿", "难看")),
        _Aspect("颜色", ("正", "鲜艳"), ("土气",)),
        _Aspect("尺码", ("标准", "合适"), ()),
        _Aspect("走线", ("整齐",), ()),
    ), ("线头", "色差", "异味"), ("质感", "弹性")),
    _Domain("product", ("", "这箱水果的", "这批橙子的"), ("这箱水果", "这批橙子", "这袋苹果"), (
        _Aspect("果肉", ("饱满", "多汁", "甜"), ("干瘪",)),
        _Aspect("口感", ("细腻", "爽脆", "甜"), ("寡淡",)),
        _Aspect("个头", ("大", "匀称"), ()),
        _Aspect("水分", ("充足",), ()),
    ), ("烂果", "坏果", "磕碰"), ("甜味", "水分")),
    _Domain("product", ("", "这款沐浴露的", "这瓶乳液的"), ("这款沐浴露", "这瓶乳液", "这款面霜"), (
        _Aspect("香味", ("清新", "淡雅"), ("刺鼻", "廉价")),
        _Aspect("效果", ("明显", "显著"), ()),   # 效果一般 is faint praise or a complaint: left out
        _Aspect("质地", ("清爽", "细腻"), ("黏腻", "厚重")),
        _Aspect("泡沫", ("细密", "绵密"), ()),
    ), ("刺激感", "异味"), ("效果",)),
    _Domain("product", ("", "这部小说的", "这套教材的"), ("这部小说", "这套教材"), (
        _Aspect("情节", ("紧凑", "吸引人"), ("拖沓", "老套")),
        _Aspect("文笔", ("优美", "细腻"), ("幼稚", "平庸")),
        _Aspect("人物", ("立体", "鲜活"), ("单薄", "扁平")),
        _Aspect("纸张", ("厚实",), ("薄", "劣质")),
        _Aspect("排版", ("美观", "合理"), ("混乱", "拥挤")),
        _Aspect("观点", ("新颖", "独到"), ("陈旧", "偏激")),
    ), ("错别字", "缺页"), ("新意", "深度")),
)

# Negators before praise: each makes a complaint (面料不够柔软, 汤并不鲜美, 外观不是很时尚: the
# lukewarm 不是很 + praise is a complaint too).
_NEGATORS_OF_GOOD = ("不", "不是很", "不太", "不够", "一点也不", "一点都不", "并不", "不怎么")
# ... except where "not X" states a fact rather than a fault (大堂不豪华, 版型不修身: loose may
# be what was wanted) or is not said (香味不淡雅, 观点不独到).
_NEGATION_OF_GOOD_IS_NOT_A_COMPLAINT = frozenset({"豪华", "气派", "修身", "淡雅", "独到"})
# Before a fault only the strong negators make praise (汤一点也不腥, 卫生间丝毫不潮湿).  不是很 /
# 不太 + fault are left out: 送餐不太慢 is lukewarm at best.  劣质 and 糟糕 are not negated so.
_NEGATORS_OF_BAD = ("一点也不", "一点都不", "一点儿也不", "丝毫不", "根本不", "完全不")
_BAD_NOT_NEGATED = frozenset({"劣质", "糟糕"})
# Bare 不 + fault is praise only where reviewers use it so (汤不腥, 肉不柴, 香味不刺鼻, 情节不拖沓);
# 外观不难看 or 纸张不薄 are faint and left out.
_BARE_NOT_PRAISES = frozenset({"腥", "柴", "刺鼻", "黏腻", "刺耳", "廉价", "拖沓", "老套", "难喝", "扎人", "厚重"})
# Comparative negators measure the thing against what was expected or promised, and flip either
# way: 汤没想象中那么鲜美 is a complaint, 房间没有预想中那么潮湿 praise.  Reviews use them a lot,
# and without them a network reads 没有 + a fault as a fault (没有想象中差 -> negative 0.99).
# The suite's own form (没有想象中那么) is left out, so its figure says whether these carry over.
_COMPARATIVE_NEGATORS = ("没想象中那么", "没有想象的那么", "没有预想中那么", "没有传说中那么", "不像宣传的那么")

# Without a subject, as short reviews say it (一点也不腥, 没想象中那么拖沓): only adjectives that keep
# their polarity whatever they describe (高 / 低 / 大 / 甜 / 硬 / 薄 depend on the aspect, so they
# are left out).  Comparative negators also appear without 那么 here (没想象中拖沓), the shorter
# form reviews use as often.
_CONTEXT_FREE_GOOD = ("舒适", "整洁", "明亮", "齐全", "便利", "友好", "和蔼", "鲜美", "可口", "地道", "准时", "迅速",
                      "漂亮", "时尚", "细腻", "稳定", "灵敏", "持久", "出色", "清新", "优美", "紧凑", "新颖", "美观")
_CONTEXT_FREE_BAD = ("破旧", "陈旧", "恶劣", "傲慢", "粗鲁", "寡淡", "腥", "夹生", "拖拉", "迟缓", "难喝", "刺耳",
                     "糟糕", "土气", "难看", "廉价", "迟钝", "缓慢", "劣质", "臃肿", "干瘪", "刺鼻", "黏腻", "拖沓",
                     "老套", "幼稚", "平庸", "混乱")
_BARE_COMPARATIVE_NEGATORS = _COMPARATIVE_NEGATORS + ("没想象中", "没有预想的", "没传说中")

# Negation idioms, after the aspects they fit (米饭不靠谱 is not said).
_IDIOM_ASPECTS = ("态度", "设施", "送餐", "口味", "性价比", "音质", "信号", "散热", "续航", "面料", "文笔", "情节",
                  "效果", "售后")
_IDIOMS = (("没的挑", POSITIVE), ("没话说", POSITIVE), ("好得没话说", POSITIVE), ("还不赖", POSITIVE),
           ("真不赖", POSITIVE), ("不尽如人意", NEGATIVE), ("不靠谱", NEGATIVE), ("不给力", NEGATIVE),
           ("不太行", NEGATIVE))

# Negated verbs about the whole thing, by the kind of thing.
_NEGATED_VERBS = {
    "place": (("以后不会再住{t}了", NEGATIVE), ("不建议住{t}", NEGATIVE), ("{t}不值这个价", NEGATIVE),
              ("住{t}不亏", POSITIVE), ("{t}没让人失望", POSITIVE)),
    "food": (("{t}不会再点了", NEGATIVE), ("不建议点{t}", NEGATIVE), ("{t}不值这个价", NEGATIVE),
             ("点{t}不亏", POSITIVE), ("{t}没让人失望", POSITIVE)),
    "product": (("{t}不值这个价", NEGATIVE), ("{t}不值得买", NEGATIVE), ("不建议买{t}", NEGATIVE),
                ("{t}不会再买了", NEGATIVE), ("买{t}不亏", POSITIVE), ("{t}没让人失望", POSITIVE),
                ("买了{t}真的不后悔", POSITIVE)),
}
# 没有 + a defect (praise) or a merit (a complaint), after the thing reviewed.
_WITHOUT_FRAMES = ("{t}没有{n}", "{t}一点{n}都没有", "{t}完全没有{n}")
# Double negation and a negation that is a discourse marker (不得不承认 + the clause that decides).
_NEGATION_HANDWRITTEN = (("没有哪一点不满意", POSITIVE), ("找不出一个缺点", POSITIVE), ("不夸不行", POSITIVE),
                         ("没有一处让人满意的", NEGATIVE), ("找不到一个优点", NEGATIVE), ("没有一点优点", NEGATIVE))
_ADMITTED = "不得不承认，{c}"

# Contrast: a mild clause conceded, a strong one of the other polarity decides (as the suite's, with
# other degree words).  不过 alone is used only here, after a mild clause, where it cannot be an
# aside to a verdict already given.
_MILD_FRAMES = {POSITIVE: ("{s}比较{x}", "{s}蛮{x}的"), NEGATIVE: ("{s}稍微有点{x}",)}
_STRONG_FRAMES = {POSITIVE: ("{s}十分{x}", "{s}超级{x}"), NEGATIVE: ("{s}相当{x}", "{s}超级{x}")}
_CONTRAST_FORMS = ("虽然{a}，但是{b}", "虽然{a}，可是{b}", "虽然{a}，不过{b}", "尽管{a}，但是{b}",
                   "{a}，但是{b}", "{a}，可是{b}", "{a}，不过{b}", "{a}，但{b}")
_VERDICTS = {
    "place": {POSITIVE: ("整体来说还是很值", "以后还会再住"), NEGATIVE: ("整体体验很糟心", "以后不会再住了")},
    "food": {POSITIVE: ("整体来说还是很值", "下回还点他家"), NEGATIVE: ("整体体验很糟心", "以后不会再点了")},
    "product": {POSITIVE: ("整体来说还是很值", "还是会回购的"), NEGATIVE: ("整体体验很糟心", "真后悔买了")},
}
# Joining two real sentences: short ones without a contrast of their own, and mostly after 虽然,
# which marks the first as conceded (a strong complaint followed by a mild "but" can still read as
# a complaint; 虽然 makes the second the point).
_REAL_CONTRAST_FORMS = ("虽然{a}，但是{b}", "虽然{a}，可是{b}", "虽然{a}，不过{b}", "{a}，但是{b}")
_CONTRAST_WORDS = ("但", "可是", "不过", "虽然", "却", "然而", "只是", "就是", "尽管")

# Slang, in carrier sentences that say nothing else evaluative.  The words are the suite's and a
# few more (天花板, 闭眼入, 割韭菜, 鸡肋); items and frames are not the suite's.  Left out as in
# the suite: 拔草, 绝了, 离谱, 上头, 破防, 666 (they read both ways).
_ITEMS = {
    "food": ("这家火锅", "这家烧烤", "这杯果茶", "他家的酸菜鱼", "这份麻辣烫"),
    "consumable": ("这款沐浴露", "这瓶乳液", "这款面霜", "这款香水"),
    "durable": ("这个充电宝", "这条裙子", "这件外套", "这款键盘"),
    "place": ("这家火锅店", "这家理发店", "这家健身房", "这家书店"),
}
_BOUGHT = ("food", "consumable", "durable")
_ANY = _BOUGHT + ("place",)
_SLANG = (
    ("{item}是真的yyds", _ANY, POSITIVE), ("{item}yyds了", _ANY, POSITIVE), ("yyds！{item}", _ANY, POSITIVE),
    ("{item}真的绝绝子", _ANY, POSITIVE), ("{item}绝绝子啊", _BOUGHT, POSITIVE), ("{item}封神了", _ANY, POSITIVE),
    ("{item}是永远的神", _ANY, POSITIVE), ("{item}我爱了", _ANY, POSITIVE), ("{item}真的爱了", _ANY, POSITIVE),
    ("{item}是宝藏啊", _ANY, POSITIVE), ("{item}必须种草", _ANY, POSITIVE), ("{item}真香了", _BOUGHT, POSITIVE),
    ("{item}已经无限回购了", ("food", "consumable"), POSITIVE), ("{item}天花板", _ANY, POSITIVE),
    ("{item}闭眼入", _BOUGHT, POSITIVE), ("{item}狠狠爱住", _ANY, POSITIVE),
    ("{item}踩大雷了", _ANY, NEGATIVE), ("避雷{item}", _ANY, NEGATIVE), ("{item}避雷避雷", _ANY, NEGATIVE),
    ("{item}翻大车了", _BOUGHT, NEGATIVE), ("{item}拉胯得很", _ANY, NEGATIVE), ("{item}是真的拉胯", _ANY, NEGATIVE),
    ("{item}我真的会谢", _ANY, NEGATIVE), ("{item}真的无语了", _ANY, NEGATIVE), ("{item}就是智商税", _BOUGHT, NEGATIVE),
    ("{item}劝退了", _ANY, NEGATIVE), ("{item}真的下头", _ANY, NEGATIVE), ("买了{item}，血亏", _BOUGHT, NEGATIVE),
    ("{item}太坑了", _ANY, NEGATIVE), ("{item}纯属割韭菜", _BOUGHT, NEGATIVE), ("{item}真鸡肋", ("durable", "consumable"), NEGATIVE),
)
# Slang after (or before) a real sentence of the same label.
_SLANG_AROUND = {
    POSITIVE: ("{t}，yyds", "{t}，绝绝子", "{t}，爱了", "{t}，真香", "{t}，宝藏", "{t}，会无限回购", "{t}，封神",
               "{t}，闭眼入", "yyds！{t}"),
    NEGATIVE: ("{t}，踩雷了", "{t}，避雷", "{t}，我真的会谢", "{t}，拉胯", "{t}，无语了", "{t}，智商税", "{t}，劝退",
               "{t}，血亏", "{t}，下头", "避雷！{t}"),
}

# Invariance copies.  The marks, spaces, numbers, years and prices are the perturbation itself and
# are the suite's sort; the emoji are other ones than the suite's (and agree with the label).
_MARKS = ("！", "!!", "。", "~", "…", "！！", "～")
_SENTENCE_END = "。！!？?~～….，, \u3000"
TRAIN_EMOJI = {POSITIVE: ("😍", "🤩", "👏", "😋", "✨", "🎉", "🌟", "💕"),
               NEGATIVE: ("🙄", "😩", "😒", "🤮", "😑", "😫", "🤬", "😓")}

# Statements of fact (no_opinion), about the training domains' things: what colour, size or
# length a thing is, when, where or by whom it was bought or ordered, where a place is.  The
# suite's frames (robustness._FACT_FRAMES) are other ones; as there, a fact that praises or faults
# (离地铁近, 很重, 刚到) is left out.
_FACT_FRAMES = {
    "place": ("{t}在解放路上", "{t}在五楼", "{t}晚上十点关门", "{t}周二休息", "我们是周六住的{t}", "{t}有三栋楼",
              "{t}是{y}年开的"),
    "food": ("{t}是中午点的", "{t}是同事点的", "{t}一共两份", "{t}是{y}年开的店", "{t}是用手机点的"),
    "product": ("{t}是白色的", "{t}是灰色的", "{t}是蓝色的", "{t}是去年买的", "{t}是同事送的", "{t}是在商场买的",
                "{t}是{y}年买的", "{t}是给家里人买的", "{t}是第二次买"),
    "book": ("{t}一共有二十章", "{t}是去年出版的", "{t}是中文版的", "{t}有四百页左右", "{t}是{y}年买的",
             "{t}是老师让买的"),
}
_FACT_SUBJECTS = {"place": ("这个酒店", "这家宾馆"), "food": ("这家外卖", "这份盒饭"),
                  "product": ("这个平板", "这台笔记本", "这件衣服", "这条裤子", "这件外套", "这款沐浴露", "这瓶乳液"),
                  "book": ("这部小说", "这套教材")}
_FACT_YEARS = tuple(range(2012, 2025))
# A real sentence with one of these is not taken as opinion-free (an evaluative or emotional
# word, or an exclamation); the list is coarse on purpose: dropping a neutral sentence costs nothing.
_EVALUATIVE = ("好", "差", "坏", "棒", "赞", "烂", "坑", "骗", "垃圾", "满意", "失望", "喜欢", "讨厌", "爱", "恨",
               "推荐", "不错", "优秀", "糟", "恶心", "难", "贵", "便宜", "值", "谢", "投诉", "生气", "气死", "无语",
               "郁闷", "烦", "急", "慢", "快", "!", "！", "哈", "呵", "欺", "太", "很", "真", "美", "丑", "香", "臭",
               "干净", "脏", "舒服", "漂亮", "方便", "麻烦", "辛苦", "幸福", "开心", "高兴", "伤心", "可惜", "遗憾",
               "精彩", "无聊", "厉害", "优", "劣", "乱", "吵", "祝", "热烈", "成功", "胜利", "失败", "危险")


# Everything above that names a thing or a frame, in the suite's categories (robustness.py's
# SUITE_VOCABULARY), so that a test can check that the two share nothing.
TRAIN_VOCABULARY: dict[str, frozenset[str]] = {
    "aspects": frozenset([a.noun for d in _DOMAINS for a in d.aspects] + list(_IDIOM_ASPECTS)),
    "adjectives": frozenset([x for d in _DOMAINS for a in d.aspects for x in a.good + a.bad]
                            + list(_CONTEXT_FREE_GOOD + _CONTEXT_FREE_BAD)),
    "subjects": frozenset([p for d in _DOMAINS for p in d.prefixes if p] + [e for d in _DOMAINS for e in d.entities]
                          + [item for items in _ITEMS.values() for item in items]
                          + [subject for subjects in _FACT_SUBJECTS.values() for subject in subjects]),
    "negation_frames": frozenset([frame_shape(f) for frames in _NEGATED_VERBS.values() for f, _ in frames]
                                 + ["{}" + idiom for idiom, _ in _IDIOMS] + [frame_shape(f) for f in _WITHOUT_FRAMES]
                                 + [d for dom in _DOMAINS for d in dom.defects + dom.merits]),
    "contrast_frames": frozenset([frame_shape(f) for frames in (_MILD_FRAMES, _STRONG_FRAMES) for fs in frames.values()
                                  for f in fs] + [v for kinds in _VERDICTS.values() for vs in kinds.values() for v in vs]),
    "slang_frames": frozenset([frame_shape(f) for f, _, _ in _SLANG]
                              + [frame_shape(f) for fs in _SLANG_AROUND.values() for f in fs]),
    "emoji": frozenset(e for emoji in TRAIN_EMOJI.values() for e in emoji),
    "fact_frames": frozenset(frame for frames in _FACT_FRAMES.values() for frame in frames),
}


def generate(texts: Sequence[str], labels: Sequence[str], *, kinds: Iterable[str] = KINDS, seed: int = 0,
             scale: float = 1.0, statements: Sequence[str] = ()) -> list[Generated]:
    """Generated sentences of ``kinds`` for the training sentences ``texts`` (labels "positive" /
    "negative"): ``SIZES`` times ``scale`` of each part; the same arguments give the same list.
    ``statements``: real sentences without an opinion (say, customer-service questions); the
    no_opinion kind samples those that :func:`opinion_free` keeps, labelled ``NEUTRAL``, beside its
    templates.

    The originals are not in it: train on ``texts`` plus these.  No sentence is one of the
    robustness suite's (a real sentence changed into one is dropped; a template that makes one
    is a bug in the lists, and stops here).
    """
    kinds = list(kinds)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown augmentation kinds {unknown}; kinds are {KINDS}")
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    bad = sorted({label for label in labels if label not in LABELS})
    if bad:
        raise ValueError(f"labels must be {LABELS}, got {bad[:5]}")
    if scale < 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    real = [(t, y) for t, y in zip(texts, labels) if isinstance(t, str) and t.strip()]

    def size(part: str) -> int:
        return round(SIZES[part] * scale)

    def rng(part: str) -> random.Random:
        return random.Random(f"{seed}:{part}")  # a str seed is hashed stably, whatever PYTHONHASHSEED

    made: list[Generated] = []
    if "invariance" in kinds:
        made += _invariance_copies(real, round(SIZES["invariance"] * scale * len(real)), rng("invariance"))
    for kind, part, pool in (("negation", "negation", negation_sentences),
                             ("negation", "negation_bare", bare_negation_sentences),
                             ("contrast", "contrast", contrast_sentences), ("slang", "slang", slang_sentences)):
        if kind in kinds:
            made += [Generated(t, y, kind, "template") for t, y in _balanced(pool(), size(part), rng(part))]
    if "contrast" in kinds:
        made += _contrast_joins(real, size("contrast_real"), rng("contrast_real"))
    if "slang" in kinds:
        made += _slang_around(real, size("slang_real"), rng("slang_real"))
    if "no_opinion" in kinds:
        made += [Generated(t, NEUTRAL, "no_opinion", "template")
                 for t in _sample(fact_sentences(), size("no_opinion"), rng("no_opinion"))]
        free = list(dict.fromkeys(t.strip() for t in statements if isinstance(t, str) and opinion_free(t)))
        # All of them: the caller chose how many (train.read_statements reads SIZES' count by default).
        made += [Generated(t, NEUTRAL, "no_opinion", "real") for t in free]
    return _held_out(made)


# --- template pools ------------------------------------------------------------------------------

def negation_sentences() -> list[tuple[str, str]]:
    """Every negation sentence the training templates make, ``(text, label)``, in a fixed order."""
    out = []
    for domain in _DOMAINS:
        for prefix, aspect in product(domain.prefixes, domain.aspects):
            subject = prefix + aspect.noun
            praise = [x for x in aspect.good if x not in _NEGATION_OF_GOOD_IS_NOT_A_COMPLAINT]
            out += [(subject + negator + x, NEGATIVE)
                    for negator, x in product(_NEGATORS_OF_GOOD + _COMPARATIVE_NEGATORS, praise)]
            for x in (x for x in aspect.bad if x not in _BAD_NOT_NEGATED):
                negators = _NEGATORS_OF_BAD + _COMPARATIVE_NEGATORS + (("不",) if x in _BARE_NOT_PRAISES else ())
                out += [(subject + negator + x, POSITIVE) for negator in negators]
        for entity, frame in product(domain.entities, _WITHOUT_FRAMES):
            out += [(frame.format(t=entity, n=n), POSITIVE) for n in domain.defects]
            out += [(frame.format(t=entity, n=n), NEGATIVE) for n in domain.merits]
        for entity, (frame, label) in product(domain.entities, _NEGATED_VERBS[domain.kind]):
            out.append((frame.format(t=entity), label))
        for aspect in domain.aspects:
            out += [(_ADMITTED.format(c=c), POSITIVE) for x in aspect.good for c in _strong(aspect.noun, x, POSITIVE)]
            out += [(_ADMITTED.format(c=c), NEGATIVE) for x in aspect.bad for c in _strong(aspect.noun, x, NEGATIVE)]
    out += [(aspect + idiom, label) for aspect, (idiom, label) in product(_IDIOM_ASPECTS, _IDIOMS)]
    out += list(_NEGATION_HANDWRITTEN)
    return _unique(out)


def bare_negation_sentences() -> list[tuple[str, str]]:
    """Every negation the templates make without a subject (一点也不腥 praise, 不太友好 a complaint,
    没想象中那么糟糕 praise), ``(text, label)``, in a fixed order."""
    out = [(negator + x, NEGATIVE) for x, negator in product(
        (x for x in _CONTEXT_FREE_GOOD if x not in _NEGATION_OF_GOOD_IS_NOT_A_COMPLAINT),
        _NEGATORS_OF_GOOD + _BARE_COMPARATIVE_NEGATORS)]
    for x in _CONTEXT_FREE_BAD:
        negators = ((() if x in _BAD_NOT_NEGATED else _NEGATORS_OF_BAD) + _BARE_COMPARATIVE_NEGATORS
                    + (("不",) if x in _BARE_NOT_PRAISES else ()))
        out += [(negator + x, POSITIVE) for negator in negators]
    return _unique(out)


def contrast_sentences() -> list[tuple[str, str]]:
    """Every contrast sentence the training templates make: a mild clause of one polarity, then a
    connective and a strong clause (or a verdict) of the other, which gives the label."""
    out = []
    for domain in _DOMAINS:
        for first, second in product(domain.aspects, domain.aspects):
            if first.noun == second.noun:
                continue
            for decided in LABELS:
                conceded = _other(decided)
                for prefix, x1, x2 in product(domain.prefixes, _adjectives(first, conceded), _adjectives(second, decided)):
                    for a, b in product(_mild(prefix + first.noun, x1, conceded), _strong(second.noun, x2, decided)):
                        out += [(form.format(a=a, b=b), decided) for form in _CONTRAST_FORMS]
        for aspect, decided in product(domain.aspects, LABELS):
            for x in _adjectives(aspect, _other(decided)):
                for a, verdict in product(_mild(aspect.noun, x, _other(decided)), _VERDICTS[domain.kind][decided]):
                    out += [(form.format(a=a, b=verdict), decided) for form in _CONTRAST_FORMS[:4]]
    return _unique(out)


def slang_sentences() -> list[tuple[str, str]]:
    """Every slang sentence the training templates make."""
    out = []
    for frame, sorts, label in _SLANG:
        out += [(frame.format(item=item), label) for sort in sorts for item in _ITEMS[sort]]
    return _unique(out)


def fact_sentences() -> list[str]:
    """Every statement of fact the no_opinion templates make (这件衣服是白色的, 这部小说有四百页左右)."""
    out = []
    for sort, frames in _FACT_FRAMES.items():
        for subject, frame in product(_FACT_SUBJECTS[sort], frames):
            out += [frame.format(t=subject, y=y) for y in _FACT_YEARS] if "{y}" in frame else [frame.format(t=subject)]
    return list(dict.fromkeys(out))


def opinion_free(text: str) -> bool:
    """Whether a real sentence may serve as a statement without an opinion: 4 to 40 chars, mostly
    Han, and none of ``_EVALUATIVE`` in it (coarse: it keeps 借呗怎么还款, drops 花呗太坑了)."""
    text = text.strip()
    if not 4 <= len(text) <= 40 or any(word in text for word in _EVALUATIVE):
        return False
    return sum("\u4e00" <= c <= "\u9fff" for c in text) >= 0.6 * len(text)


def _sample(pool: list[str], count: int, rng: random.Random) -> list[str]:
    """``count`` of ``pool`` without repeats, in pool order (the whole pool when it is smaller)."""
    if count >= len(pool):
        return list(pool)
    return [pool[i] for i in sorted(rng.sample(range(len(pool)), count))]


def _adjectives(aspect: _Aspect, polarity: str) -> tuple[str, ...]:
    return aspect.good if polarity == POSITIVE else aspect.bad


def _other(label: str) -> str:
    return POSITIVE if label == NEGATIVE else NEGATIVE


def _mild(subject: str, adjective: str, polarity: str) -> list[str]:
    return [frame.format(s=subject, x=adjective) for frame in _MILD_FRAMES[polarity]]


def _strong(subject: str, adjective: str, polarity: str) -> list[str]:
    return [frame.format(s=subject, x=adjective) for frame in _STRONG_FRAMES[polarity]]


# --- from real sentences -------------------------------------------------------------------------

def _invariance_copies(real: list[tuple[str, str]], count: int, rng: random.Random) -> list[Generated]:
    perturbations = (_punctuation, _whitespace, _digits, _emoji, _year, _price)
    picked = rng.sample(range(len(real)), min(count, len(real)))
    out = []
    for i in sorted(picked):
        text, label = real[i]
        variant = rng.choice(perturbations)(text, label, rng)
        if variant != text:
            out.append(Generated(variant, label, "invariance", "real"))
    return out


def _contrast_joins(real: list[tuple[str, str]], count: int, rng: random.Random) -> list[Generated]:
    # Short sentences only (a concession of at most 20 chars, a point of at most 30): a long review
    # joined to another reads as two reviews, not as one that turns.
    clauses: dict[str, list[str]] = {label: [] for label in LABELS}
    for text, label in real:
        clause = _strip_end(text.strip())
        if 4 <= len(clause) <= 30 and not any(w in clause for w in _CONTRAST_WORDS):
            clauses[label].append(clause)
    conceded = {label: [c for c in clauses[label] if len(c) <= 20] for label in LABELS}
    if not all(clauses.values()) or not all(conceded.values()):
        return []
    out = []
    for k in range(count):
        decided = LABELS[k % 2]
        a, b = rng.choice(conceded[_other(decided)]), rng.choice(clauses[decided])
        out.append(Generated(rng.choice(_REAL_CONTRAST_FORMS).format(a=a, b=b), decided, "contrast", "real"))
    return out


def _slang_around(real: list[tuple[str, str]], count: int, rng: random.Random) -> list[Generated]:
    bases = {label: [_strip_end(t.strip()) for t, y in real if y == label and 2 <= len(t.strip()) <= 60]
             for label in LABELS}
    if not all(bases.values()):
        return []
    out = []
    for k in range(count):
        label = LABELS[k % 2]
        frame = rng.choice(_SLANG_AROUND[label])
        out.append(Generated(frame.format(t=rng.choice(bases[label])), label, "slang", "real"))
    return out


def _strip_end(text: str) -> str:
    return text.rstrip(_SENTENCE_END)


def _punctuation(text: str, label: str, rng: random.Random) -> str:
    return _strip_end(text) + rng.choice(_MARKS)


def _whitespace(text: str, label: str, rng: random.Random) -> str:
    way = rng.randrange(3)
    if way == 0:
        return " " + text.replace("，", "， ").replace(",", ", ") + "  "
    if way == 1 and len(text) > 2:
        at = rng.randrange(1, len(text) - 1)
        return text[:at] + rng.choice((" ", "  ")) + text[at:]
    return text + rng.choice((" ", "\u3000", "  "))


def _digits(text: str, label: str, rng: random.Random) -> str:
    number = str(rng.choice((rng.randrange(0, 10), rng.randrange(10, 100), rng.randrange(100, 10000))))
    way, cut = rng.randrange(3), _first_clause_end(text)
    if way == 1 and cut is not None:
        return text[:cut] + number + text[cut:]
    if way == 2:
        return rng.choice((f"{rng.randrange(1, 6)}、", f"{rng.randrange(1, 6)}.", f"({rng.randrange(1, 6)})")) + text
    return text + number


def _emoji(text: str, label: str, rng: random.Random) -> str:
    emoji, cut = rng.choice(TRAIN_EMOJI[label]), _first_clause_end(text)
    if cut is not None and rng.random() < 0.3:
        return text[:cut] + emoji + text[cut:]
    return text + emoji * rng.choice((1, 1, 2, 3))


def _year(text: str, label: str, rng: random.Random) -> str:
    year, month, day = rng.randrange(2010, 2027), rng.randrange(1, 13), rng.randrange(1, 29)
    return rng.choice((f"{year}年，{text}", f"{year}年{month}月{day}日，{text}", f"{text}（{year}年{month}月）",
                       f"{year}.{month}.{day} {text}"))


def _price(text: str, label: str, rng: random.Random) -> str:
    price = rng.choice((str(rng.randrange(5, 100)), str(rng.randrange(100, 10000)), f"{rng.randrange(5, 300)}.9"))
    return rng.choice((f"售价{price}元，{text}", f"{text}（价格{price}元）", f"到手价{price}，{text}",
                       f"花了{price}块，{text}", f"{text}，{price}元买的"))


# --- keeping the suite held out ------------------------------------------------------------------

def _key(text: str) -> str:
    """What the model reads (normalised), without the ends the invariances add."""
    return _strip_end(normalize(text).strip())


@lru_cache(maxsize=1)
def _suite() -> tuple[frozenset[str], tuple[str, ...]]:
    """The suite's texts (every labelled case and every template base, as keys) and the reported
    labelled sentences, which no template sentence may even contain."""
    cases = generate_cases(per_kind=None)
    texts = {_key(t) for c in cases for t in (c.text, c.original) if t is not None}
    texts |= {_key(t) for c in REPORTED_CASES for t in (c.text, c.original) if t is not None}
    texts |= {_key(t) for t in no_opinion_sentences()}
    reported = tuple(normalize(c.text) for c in REPORTED_CASES if c.original is None)
    return frozenset(texts), reported


def _held_out(made: list[Generated]) -> list[Generated]:
    suite, reported = _suite()
    out, seen = [], set()
    for g in made:
        key = _key(g.text)
        if g.source == "template":
            hits = [s for s in reported if s in normalize(g.text)]
            if key in suite or hits:
                raise AssertionError(f"the training templates make the suite's sentence {g.text!r}: "
                                     "TRAIN_VOCABULARY must not share words or frames with SUITE_VOCABULARY")
        elif key in suite:
            continue     # a real sentence that a perturbation turned into a suite case
        if (g.text, g.label) not in seen:
            seen.add((g.text, g.label))
            out.append(g)
    return out


def _unique(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each text once; two templates that give one text both labels are a bug in the lists."""
    seen: dict[str, str] = {}
    for text, label in pairs:
        if seen.setdefault(text, label) != label:
            raise AssertionError(f"training templates give {text!r} both labels")
    return list(seen.items())


def _balanced(pool: list[tuple[str, str]], count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` pairs without repeats, half of each label where the pool allows, in pool order."""
    if count >= len(pool):
        return list(pool)
    positive = [i for i, (_, y) in enumerate(pool) if y == POSITIVE]
    negative = [i for i, (_, y) in enumerate(pool) if y == NEGATIVE]
    take_positive = min(len(positive), count // 2)
    take_negative = min(len(negative), count - take_positive)
    take_positive = min(len(positive), count - take_negative)
    chosen = set(rng.sample(positive, take_positive)) | set(rng.sample(negative, take_negative))
    return [pool[i] for i in sorted(chosen)]
