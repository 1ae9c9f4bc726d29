"""Generated pairs for matching: hard negatives and paraphrase positives.

The matching corpora teach "same question" mostly from pairs that differ a lot,
so a model learns that two texts sharing nearly every character mean the same:
``北京到上海的高铁票多少钱`` / ``上海到北京的高铁票多少钱`` scores high, and a
one-character paraphrase (``截图`` / ``截屏``) is a coin toss.  The generators
below turn one question into a labelled pair that differs from it in one place,
by a hand-written rule whose effect on the meaning is known:

Hard negatives (label 0, the edit changes what is asked):

* ``swap``: two entities of one class around a relation marker trade places:
  places around ``到 去 至 飞往 开往 回`` (``北京到上海`` → ``上海到北京``),
  people around ``欠 给 借给 还给 转账给 喜欢 帮 比 …`` (``张三欠李四``,
  ``我给他转账``), accounts around ``转到 转入 还 到 …`` (``余额宝转入花呗``,
  ``信用卡还花呗``: paying one with the other).  Symmetric markers
  (``和 与 跟``) are not used: ``北京和上海`` swapped is the same question.
  Skipped: two identical entities (``你``/``您`` count as one), a text that
  already holds the swapped phrase too.
* ``number``: a count or amount before a unit (天 个月 年 次 期 元 块 万 号 点 …)
  becomes another plausible one: ``3天`` → ``7天``, ``500元`` → ``5000元``,
  ``2019年`` → ``2021年``, a day of the month stays in 1–31, a month in 1–12.
  Chinese numerals 两…九十九 are changed in Chinese (``三天`` → ``七天``); ``一`` is
  left alone (``一下``, ``一次性``, ``一个`` are rarely counts).  Skipped: digits
  inside IDs (a run of five or more digits, a number next to letters, ``.`` or
  ``*`` masking, or after 尾号 / 卡号 / 账号 / 手机号 / 验证码 …).
* ``entity``: an entity becomes another of its class that the text does not
  already hold: cities, banks, phone and car brands, payment products
  (``花呗`` ↔ ``借呗`` ↔ ``余额宝`` ↔ ``微粒贷``…: different products here, not
  synonyms), apps, card types (``信用卡`` ↔ ``储蓄卡``; ``借记卡``, a synonym
  of ``储蓄卡``, is not in the class), days (``明天`` ↔ ``昨天``), person names.
* ``negation``: ``不`` inserted before ``能 可以 有 是`` (``没`` before ``有``), or
  removed from ``不能 不可以 没有 不是 不会``.  Only in texts where this flips
  the question: not in yes/no questions (``…吗``, ``…吧``, ``是否``, ``能否``,
  ``能不能``-style A-not-A), where ``能借款吗`` and ``不能借款吗`` ask the same
  thing; not in a text that already holds another negation (double negatives);
  not inside words (``功能 可能 所有 还有 但是 就是 还没有`` …) and not before a
  question word (``是什么`` → ``不是什么`` is no longer a question).

The everyday contrasts (drawn when asked for by name):

* ``antonym``: a verb or adjective becomes its opposite from a hand-written table
  (``开通``/``关闭``, ``注册``/``注销``, ``提高``/``降低``, ``绑定``/``解绑``, ``转入``/``转出``,
  ``最高``/``最低``, ``上传``/``下载`` …).
* ``question``: the question asks about another thing: its question phrase, before the verb
  it asks about, becomes one of another focus (manner ``如何``, place ``在哪里``, time
  ``什么时候``, reason ``为什么``): ``信用卡怎么办理`` → ``信用卡在哪里办理``.  ``怎么`` is a
  source only before a how-to verb (elsewhere it may mean why) and never a target.
* ``setting``: a time of day, a week, a weekday or a place of one kind becomes another
  (``早上``/``晚上``, ``本周``/``下周``, ``周一``/``周五``, ``机场``/``火车站``, ``国内``/``国外``);
  ``周一`` and ``星期一`` are one day.

Paraphrase positives (label 1):

* ``synonym``: one phrase replaced by a true synonym from a hand-written table
  (``怎么``/``如何``/``怎样``, ``为什么``/``为何``, ``截图``/``截屏``,
  ``苹果手机``/``iPhone``, ``手机号``/``手机号码``, ``还款``/``还钱``,
  ``储蓄卡``/``借记卡``, ``可以`` → ``能`` one way …), with the contexts where
  the two differ refused: ``怎么`` before ``样 办 回事 了 不 没 还 又 会 …``
  (where it means "why" or is another word), ``多少钱`` after a verb
  (``借了多少钱`` asks an amount, not a price), ``还可以``.
* ``symmetric``: two entities of one class around ``和 与 跟`` trade places where what follows
  asks a symmetric question (``花呗和借呗有什么区别`` → ``借呗和花呗有什么区别``, ``北京和上海
  哪个冷``): the other side of ``swap``, so that a model learns which changes of order matter
  rather than that any change of order does (what adversarial paraphrase sets test).
* ``surface``: a polite prefix (``请问``, ``你好，``) added or removed, or a
  trailing ``呢``/``啊`` on a question with a question word, or ``吗`` on a
  statement-form question with a modal (``花呗可以分期`` → ``花呗可以分期吗``).

Each generator takes one question and a ``random.Random`` and returns a
:class:`GeneratedPair` ``(text1, text2, label, kind)`` (``text1`` the question
itself) or ``None`` where its rule does not apply; the choices it makes (which
occurrence, which replacement) come from the ``rng``, so a seed fixes the
output.  A pair whose texts the model would read identically is never returned.
:func:`augmented_pairs` draws a given number of pairs from a list of questions,
half negatives, half positives, spread over the kinds.  :func:`framed_questions` writes questions
around the swap markers (:data:`SWAP_FRAMES`) for the recipe's ``--framed-questions``: the bank
corpora hold too few questions with two entities of one class for ``swap`` and ``symmetric``.
"""

from __future__ import annotations

import csv
import random
import re
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator, Sequence

from taskflow.tasks.text_similarity.features import model_text

from .lexicon import LEXICON_NEGATIVE_KINDS, LEXICON_POSITIVE_KINDS, GeneratedPair

__all__ = ["GeneratedPair", "NEGATIVE_KINDS", "POSITIVE_KINDS", "KINDS", "GENERATORS", "swap_roles",
           "change_number", "change_entity", "flip_negation", "substitute_synonym", "edit_surface", "swap_symmetric",
           "SWAP_FRAMES", "framed_questions", "change_antonym", "change_question", "change_setting",
           "FRAMED_KINDS", "CONTRAST_KINDS", "augmented_pairs", "generated_training_pairs", "SWAP_DEV", "read_generated", "write_generated"]


NEGATIVE_KINDS = ("swap", "number", "entity", "negation", "antonym", "question", "setting")
POSITIVE_KINDS = ("synonym", "surface", "symmetric")
# The default draw; ``symmetric`` joins it with framed questions (generated_training_pairs), and
# the everyday contrasts (antonym, question, setting) are asked for by name (the recipe's
# --kinds), so that the recipes of packages made before them still draw the same pairs from the
# same seed.
KINDS = ("swap", "number", "entity", "negation", "synonym", "surface")
FRAMED_KINDS = KINDS + ("symmetric",)
CONTRAST_KINDS = FRAMED_KINDS + ("antonym", "question", "setting")

# ----------------------------------------------------------------- lexicons

CITIES = ("北京", "上海", "广州", "深圳", "杭州", "南京", "重庆", "武汉", "天津", "苏州", "长沙", "郑州", "青岛",
          "厦门", "沈阳", "哈尔滨", "昆明", "济南", "合肥", "福州", "南昌", "石家庄", "太原", "贵阳", "南宁", "兰州",
          "宁波", "无锡", "成都", "西安", "三亚", "拉萨", "乌鲁木齐", "香港", "澳门", "台北")
PERSON_NAMES = ("张三", "李四", "王五", "赵六", "小明", "小红", "小王", "小李", "小张")
PEOPLE = PERSON_NAMES + ("我们", "你们", "他们", "她们", "我", "你", "您", "他", "她", "朋友", "老公", "老婆", "爸爸",
                         "妈妈", "同事", "别人", "对方")
ACCOUNTS = ("蚂蚁花呗", "蚂蚁借呗", "余额宝", "支付宝余额", "微信余额", "微信零钱", "零钱通", "零钱", "余额", "银行卡", "储蓄卡", "信用卡", "花呗", "借呗",
            "支付宝", "微信", "微粒贷", "余利宝")

# The classes an entity may be replaced within: members of a class are different things.
ENTITY_CLASSES = {
    "city": CITIES,
    # not 中国银行: 中国工商银行 holds 工商银行, and 中国 + 中国银行 would be no bank
    "bank": ("工商银行", "建设银行", "农业银行", "招商银行", "交通银行", "邮政储蓄银行", "浦发银行", "民生银行",
             "兴业银行", "光大银行", "中信银行", "平安银行", "华夏银行", "广发银行"),
    "phone_brand": ("苹果", "华为", "小米", "三星", "OPPO", "vivo", "魅族"),
    "car_brand": ("宝马", "奔驰", "奥迪", "丰田", "本田", "特斯拉"),
    # credit and loans among themselves, savings among themselves: 花呗还了最低还款 → 余额宝… would ask nothing
    "credit": ("蚂蚁花呗", "蚂蚁借呗", "花呗", "借呗", "微粒贷", "网商贷", "备用金"),
    "savings": ("余额宝", "余利宝", "零钱通"),
    "app": ("微信", "支付宝", "淘宝", "京东", "拼多多", "美团", "抖音"),
    "card": ("信用卡", "储蓄卡"),
    "day": ("今天", "明天", "昨天", "后天", "前天"),
    "year": ("今年", "去年", "明年"),
    "month": ("这个月", "上个月", "下个月"),
    "name": PERSON_NAMES,
}

# Entities may trade places around these markers; only entities of the marker's class count.
SWAP_MARKERS = {
    "city": ("飞往", "开往", "到", "去", "至", "回", "飞", "比"),
    # not 帮: 你帮我看看… is a request's framing, its question is elsewhere
    "person": ("转账给", "打钱给", "转钱给", "汇款给", "借给", "还给", "转给", "发给", "打给", "嫁给", "欠", "给",
               "喜欢", "比"),
    # not a bare 到: 蚂蚁借呗到银行卡要多久 asks how long a loan takes to arrive, and has no swapped reading
    "account": ("转账到", "提现到", "充值到", "转到", "转入", "转进", "充到", "还", "比"),
}
SWAP_CLASSES = {"city": CITIES, "person": PEOPLE, "account": ACCOUNTS}
SAME_PERSON = {"您": "你"}

# Words that contain an entity, a negation target or a synonym without being it: a match inside
# one of these is not a match (其他 holds no 他, 功能 no modal 能, 提前天数 no 前天).
NOT_A_MATCH = (
    "其他", "其它", "吉他", "他人", "你好", "您好", "自我", "我国", "我司", "北京时间", "提前天", "完成都",
    "变成都", "达成都", "构成都", "形成都", "组成都", "造成都", "生成都", "西安全", "苹果味", "小米粥", "小米粒", "三星级", "苹果id",
    "功能", "可能", "智能", "性能", "技能", "本能", "才能", "只能", "万能", "潜能", "体能", "效能", "能力", "能量",
    "能源", "能否", "能耐", "能手", "职能", "节能", "全能", "无能", "机能", "能效",
    "所有", "有效", "有限", "有点", "有些", "有关", "还有", "只有", "拥有", "具有", "有的", "有时", "有用", "有个",
    "有一", "有多", "共有", "占有", "持有", "含有", "有着", "已有", "有何", "有意", "有名", "有趣", "有利", "有偿",
    "有权", "有否", "有无", "有没", "没有", "有人", "有事", "有钱人", "稀有", "私有", "国有", "富有", "有劲",
    "但是", "就是", "还是", "是否", "可是", "要是", "于是", "总是", "真是", "是的", "凡是", "或是", "只是", "若是",
    "硬是", "老是", "倒是", "正是", "本是", "便是", "即是", "也是", "都是", "算是", "像是", "不是",
    "还可以", "还没有", "并没有", "并不", "不是很", "不是太", "不会吧", "不可以吧",
    "借款人", "还款人",
    "这两天", "前两天", "这两年", "前两年", "两三", "三四", "四五",
)

QUESTION_WORDS = ("什么", "怎么", "怎样", "如何", "为什么", "为何", "为啥", "多少", "几", "哪", "谁", "何时", "多久",
                  "多长", "啥", "咋", "那里")
_PARTICLES = "吗呢啊呀吧嘛么哦啦"


def _compile(words: Iterable[str]) -> re.Pattern:
    """Longest first, so that at any position the longest listed word wins (手机号码 over 手机号)."""
    return re.compile("|".join(re.escape(w) for w in sorted(set(words), key=lambda w: (-len(w), w))), re.I)


# At each position the longest listed word (a lookahead, so that overlapping words are all found).
_NOT_A_MATCH = re.compile("(?=(" + _compile(NOT_A_MATCH).pattern + "))", re.I)


def _blocked_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.start() + len(m.group(1))) for m in _NOT_A_MATCH.finditer(text)]


def _inside_blocked(start: int, end: int, blocked: list[tuple[int, int]]) -> bool:
    """Whether ``text[start:end]`` lies inside a longer NOT_A_MATCH word."""
    return any(s <= start and end <= e and (e - s) > (end - start) for s, e in blocked)


def _tokens(text: str, pattern: re.Pattern) -> list[re.Match]:
    """The pattern's matches (leftmost, longest), those inside a NOT_A_MATCH word left out."""
    blocked = _blocked_spans(text)
    return [m for m in pattern.finditer(text) if not _inside_blocked(m.start(), m.end(), blocked)]


def _replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _pair(text: str, new: str, label: int, kind: str) -> GeneratedPair | None:
    if not new.strip() or model_text(new) == model_text(text):
        return None
    return GeneratedPair(text, new, label, kind)


def _split_tail(text: str) -> tuple[str, str]:
    """``(body, trailing punctuation and spaces)``."""
    match = re.search(r"[\s\W_]*$", text)
    return text[:match.start()], text[match.start():]


def _is_yes_no_question(text: str) -> bool:
    body, _ = _split_tail(text)
    if re.search(r"(.)[不没]\1", body) or re.search("是否|能否|可否|有无|有没|可以不", body):
        return True
    if re.search("[吗嘛]", body) or body.endswith(("吧", "没", "不")):
        return True                 # 可以延期吗？这资金有点紧: a yes/no question in any clause
    if text.rstrip().endswith(("？", "?")) and not _has_question_word(body):
        return True                 # 是你们的App？ asks yes or no by its question mark
    return body.endswith("么") and not body.endswith(("什么", "怎么", "这么", "那么", "多么", "要么"))


def _has_question_word(text: str) -> bool:
    return any(word in text for word in QUESTION_WORDS)


# -------------------------------------------------------------- negatives

_SWAP_PATTERNS = {cls: (_compile(SWAP_CLASSES[cls]), _compile(markers)) for cls, markers in SWAP_MARKERS.items()}


def _neighbour_entities(text: str) -> Iterator[tuple[re.Match, re.Match, re.Pattern]]:
    """Each two consecutive entities of one swap class in ``text`` (``(left, right, the class's
    markers)``) that could trade places: neither is part of a longer phrase with an entity next to
    it (我朋友比我, 微信余额还花呗) and they are not one entity (``你``/``您`` count as one)."""
    for entities, markers in _SWAP_PATTERNS.values():
        tokens = _tokens(text, entities)
        for i, (left, right) in enumerate(zip(tokens, tokens[1:])):
            joined_before = i > 0 and tokens[i - 1].end() == left.start()
            joined_after = i + 2 < len(tokens) and tokens[i + 2].start() == right.end()
            a, b = left.group(), right.group()
            if not (joined_before or joined_after or SAME_PERSON.get(a, a) == SAME_PERSON.get(b, b)):
                yield left, right, markers


def _swapped(text: str, candidates: list[tuple[int, int, str]], rng: random.Random, label: int,
             kind: str) -> GeneratedPair | None:
    if not candidates:
        return None
    start, end, swapped = rng.choice(sorted(candidates))
    return _pair(text, _replace(text, start, end, swapped), label, kind)


def swap_roles(text: str, rng: random.Random) -> GeneratedPair | None:
    """Two entities of one class around a relation marker trade places (label 0).

    >>> swap_roles("北京到上海的高铁票多少钱", random.Random(0)).text2
    '上海到北京的高铁票多少钱'
    >>> swap_roles("北京到北京的高铁", random.Random(0)) is None
    True
    """
    candidates = []
    for left, right, markers in _neighbour_entities(text):
        marker = markers.fullmatch(text, left.end(), right.start())
        swapped = marker and right.group() + marker.group() + left.group()
        if swapped and swapped not in text:      # both directions asked already: the swap asks the same
            candidates.append((left.start(), right.end(), swapped))
    return _swapped(text, candidates, rng, 0, "swap")


_UNITS = ("个月", "分钟", "小时", "个", "天", "年", "次", "期", "元", "块", "万", "千", "号", "日", "岁", "笔", "张", "周",
          "倍", "点", "月", "辆", "台", "本")
_CHINESE_DIGITS = "零一二两三四五六七八九"
_NUMBER = re.compile(r"((?<![0-9A-Za-z.*＊/])\d{1,4}(?![0-9A-Za-z.*＊%％/])"
                     r"|(?<![零一二两三四五六七八九十百千万])[两二三四五六七八九十]{1,3})"
                     r"(?=(" + "|".join(_UNITS) + "))")
_ID_CONTEXT = re.compile(r"(尾号|卡号|账号|帐号|号码|手机号|手机|电话|验证码|密码|编号|单号|订单|身份证|qq|QQ|ID|id|工号|"
                         r"车牌|邮编|型号|版本)\s*$")
_NICE = (1, 2, 3, 5, 6, 7, 8, 10, 12, 15, 20, 24, 30, 36, 50, 100, 200, 300, 500, 1000, 2000, 3000, 5000, 8000,
         10000, 20000, 50000)


def _chinese_value(numeral: str) -> int | None:
    """2..99 written 两/二…九十九; ``None`` for anything else (十十, 二三)."""
    digits = {c: i for i, c in enumerate(_CHINESE_DIGITS)}
    digits["两"] = 2
    if numeral == "十":
        return 10
    if len(numeral) == 1:
        return digits.get(numeral)
    if len(numeral) == 2 and numeral[0] == "十" and numeral[1] in digits:
        return 10 + digits[numeral[1]]
    if len(numeral) == 2 and numeral[1] == "十" and numeral[0] in digits:
        return 10 * digits[numeral[0]]
    if len(numeral) == 3 and numeral[1] == "十" and numeral[0] in digits and numeral[2] in digits:
        return 10 * digits[numeral[0]] + digits[numeral[2]]
    return None


def _chinese_numeral(value: int) -> str:
    names = "零一二三四五六七八九"
    if value < 10:
        return "两" if value == 2 else names[value]
    tens, ones = divmod(value, 10)
    return ("" if tens == 1 else names[tens]) + "十" + (names[ones] if ones else "")


def _other_number(value: int, unit: str, rng: random.Random) -> int | None:
    if unit == "年" and 1900 <= value <= 2099:
        return value + rng.choice((-3, -2, -1, 1, 2, 3))
    limits = {"号": 31, "日": 31, "月": 12, "点": 12}
    if unit in ("千", "万") and value < 10:
        return rng.choice([v for v in range(1, 10) if v != value])      # 七千 → 三千, not 十五千
    if unit in limits:
        if not 1 <= value <= limits[unit]:
            return None              # not a date or a time of day: an ID or a code
        return rng.choice([v for v in range(1, limits[unit] + 1) if v != value])
    if value >= 1000 and unit not in ("元", "块", "万", "千"):
        return None                  # four digits before a count unit: an ID more likely than a count
    low, high = max(1, value // 10), max(10, value * 10)
    choices = [v for v in _NICE if low <= v <= high and v != value]
    return rng.choice(choices) if choices else None


def change_number(text: str, rng: random.Random) -> GeneratedPair | None:
    """A count, amount, date or year becomes another (label 0); numbers in IDs are left alone.

    >>> change_number("借款3天利息多少", random.Random(1)).text2
    '借款5天利息多少'
    >>> change_number("卡号尾号1234的卡", random.Random(1)) is None
    True
    """
    candidates = []
    blocked = _blocked_spans(text)
    for match in _NUMBER.finditer(text):
        numeral, unit = match.group(1), match.group(2)
        if _ID_CONTEXT.search(text[:match.start()]) or _inside_blocked(match.start(), match.end() + len(unit), blocked):
            continue
        if text.count(numeral + unit) > 1:
            continue                # 推迟两天吗…可以推迟两天还款吗: changing one would leave the text at odds
        if numeral.isdigit():
            value = int(numeral)
        else:
            value = _chinese_value(numeral)
            if value is None:
                continue
        new = _other_number(value, unit, rng)
        if new is None or new == value:
            continue
        written = str(new) if numeral.isdigit() or new > 99 else _chinese_numeral(new)
        candidates.append((match.start(), match.end(), written))
    if not candidates:
        return None
    start, end, written = rng.choice(candidates)
    return _pair(text, _replace(text, start, end, written), 0, "number")


# Short names are found, and replaced by another bank's full name (never written: 工行 for 工商银行 is the same bank).
BANK_SHORT_NAMES = {"工行": "工商银行", "建行": "建设银行", "农行": "农业银行", "招行": "招商银行"}
_ENTITY_OF = {word.lower(): cls for cls, words in ENTITY_CLASSES.items() for word in words}
_ENTITY_OF.update((short, "bank") for short in BANK_SHORT_NAMES)
_ENTITIES = _compile(_ENTITY_OF)


def change_entity(text: str, rng: random.Random) -> GeneratedPair | None:
    """An entity becomes another of its class that the text does not hold (label 0).

    >>> change_entity("花呗怎么还款", random.Random(0))
    GeneratedPair(text1='花呗怎么还款', text2='网商贷怎么还款', label=0, kind='entity')
    """
    lowered = text.lower()
    candidates = []
    for match in _tokens(text, _ENTITIES):
        cls = _ENTITY_OF[match.group().lower()]
        others = [w for w in ENTITY_CLASSES[cls]
                  if w.lower() not in lowered and not _confusable(w.lower(), match.group().lower())]
        if others:
            candidates.append((match, others))
    if not candidates:
        return None
    match, others = rng.choice(candidates)
    new, changed = rng.choice(others), text
    for same in reversed([m for m in candidates if m[0].group() == match.group()]):   # every mention of it
        changed = _replace(changed, same[0].start(), same[0].end(), new)
    return _pair(text, changed, 0, "entity")


def _confusable(a: str, b: str) -> bool:
    """One entity under two names: a bank's short and full name, 花呗 inside 蚂蚁花呗."""
    a, b = BANK_SHORT_NAMES.get(a, a), BANK_SHORT_NAMES.get(b, b)
    return a in b or b in a


_NEGATION_CHARS = re.compile("[不没无未别非莫勿]")
_INSERT = _compile(("可以", "能", "有", "是"))
_REMOVE = {"不能": "能", "不可以": "可以", "没有": "有", "不是": "是", "不会": "会"}
_REMOVABLE = _compile(_REMOVE)


def _followed_by_content(text: str, end: int) -> bool:
    """The next char is a Han char that is not a particle, and no question word starts there."""
    rest = text[end:]
    return bool(rest) and "\u4e00" <= rest[0] <= "\u9fff" and rest[0] not in _PARTICLES \
        and not rest.startswith(QUESTION_WORDS + ("多",))


def flip_negation(text: str, rng: random.Random) -> GeneratedPair | None:
    """``不``/``没`` inserted before a modal or verb, or removed (label 0), where the question flips.

    >>> flip_negation("为什么不能借款", random.Random(0)).text2
    '为什么能借款'
    >>> flip_negation("花呗可以分期吗", random.Random(0)) is None      # a yes/no question: 不可以…吗 asks the same
    True
    """
    body, _ = _split_tail(text)
    if _is_yes_no_question(text) or "还是" in body:
        return None                 # …还是…: a choice, which a negation turns into nonsense
    negations = _NEGATION_CHARS.findall(body)
    blocked = _blocked_spans(text)
    candidates = []
    if not negations:
        for match in _INSERT.finditer(body):
            if _inside_blocked(match.start(), match.end(), blocked) or not _followed_by_content(text, match.end()):
                continue
            before = body[:match.start()]
            if _has_question_word(body[match.end():]) or re.search("多久|多长|多少|几", body) or before.endswith("才") \
                    or before.endswith(("如何", "怎样")) \
                    or (before.endswith(("什么", "啥", "谁", "哪")) and not before.endswith(("为什么", "为啥"))):
                continue            # 可以提前几天还款, 借款多久可以到, 要多少才可以用, 什么是, 如何能够: with 不
                                    # they ask nothing (怎么不能 asks why, 如何不能 nothing)
            negation = "没" if match.group() == "有" else "不"
            candidates.append((match.start(), match.end(), negation + match.group()))
    elif len(negations) == 1:
        for match in _REMOVABLE.finditer(body):
            if _inside_blocked(match.start(), match.end(), blocked) or not _followed_by_content(text, match.end()):
                continue
            candidates.append((match.start(), match.end(), _REMOVE[match.group()]))
    if not candidates:
        return None
    start, end, new = rng.choice(candidates)
    return _pair(text, _replace(text, start, end, new), 0, "negation")


# Opposites: each word may become any word listed opposite it (one table, read both ways).
ANTONYMS = (
    ("注册", "注销"), ("开通", "关闭"), ("打开", "关闭"), ("开启", "关闭"), ("开通", "取消"), ("提高", "降低"),
    ("调高", "调低"), ("调大", "调小"), ("增加", "减少"), ("上调", "下调"), ("升级", "降级"), ("绑定", "解绑"),
    ("冻结", "解冻"), ("转入", "转出"), ("充值", "提现"), ("存钱", "取钱"), ("存款", "取款"), ("收款", "付款"),
    ("借款", "还款"), ("借钱", "还钱"), ("买入", "卖出"), ("登录", "退出"), ("安装", "卸载"), ("上传", "下载"),
    ("提前", "推迟"), ("延长", "缩短"), ("开户", "销户"), ("显示", "隐藏"), ("允许", "禁止"), ("接受", "拒绝"),
    ("成功", "失败"), ("最高", "最低"), ("最多", "最少"), ("上涨", "下跌"), ("放大", "缩小"), ("订票", "退票"),
    ("入住", "退房"), ("上车", "下车"), ("进站", "出站"), ("起飞", "降落"), ("开机", "关机"), ("收入", "支出"),
    ("变高", "变低"), ("变多", "变少"), ("加入", "退出"), ("买", "卖"),
)
_ANTONYM_OF: dict[str, tuple[str, ...]] = {}
for _a, _b in ANTONYMS:
    _ANTONYM_OF[_a] = _ANTONYM_OF.get(_a, ()) + (_b,)
    _ANTONYM_OF[_b] = _ANTONYM_OF.get(_b, ()) + (_a,)
_ANTONYM_WORDS = _compile(_ANTONYM_OF)
# 买 and 卖 only as verbs on their own: not in 买单 (the bill), 购买/买卖/卖家 (other words).
_NOT_A_BUY = re.compile("买单|买卖|卖家|买家|购买|出卖|拍卖|贩卖|卖场|外卖|团购买")


def change_antonym(text: str, rng: random.Random) -> GeneratedPair | None:
    """A word becomes its opposite (label 0).

    >>> change_antonym("怎么开通花呗", random.Random(0)).text2
    '怎么取消花呗'
    """
    buy_blocked = [(m.start(), m.end()) for m in _NOT_A_BUY.finditer(text)]
    candidates = [m for m in _tokens(text, _ANTONYM_WORDS)
                  if not (len(m.group()) == 1 and any(s <= m.start() < e for s, e in buy_blocked))]
    if not candidates:
        return None
    match = rng.choice(candidates)
    others = [w for w in _ANTONYM_OF[match.group()] if w not in text]
    if not others:
        return None
    return _pair(text, _replace(text, match.start(), match.end(), rng.choice(others)), 0, "antonym")


# What a question asks about: a phrase of one focus replaced by the first phrase of another asks
# another thing.  Only these four foci trade places: each stands before the verb it asks about
# (怎么办理 / 在哪里办理 / 什么时候办理 / 为什么办理); price, person and duration phrases do not
# (为什么我钱借不出来 with 多少钱 is no question), and 多久到账 asks what 什么时候到账 asks.
QUESTION_FOCUS = {
    "manner": ("如何", "怎样", "怎么"),
    "place": ("在哪里", "在哪儿", "在哪"),
    "time": ("什么时候", "何时"),
    "reason": ("为什么", "为何", "为啥"),
}
_FOCUS_OF = {phrase: focus for focus, phrases in QUESTION_FOCUS.items() for phrase in phrases}
_FOCUS_PHRASES = _compile(_FOCUS_OF)


def change_question(text: str, rng: random.Random) -> GeneratedPair | None:
    """The question phrase becomes one of another focus (label 0): what is asked changes.

    >>> change_question("信用卡怎么办理", random.Random(0)).text2
    '信用卡什么时候办理'
    """
    candidates = []
    for match in _tokens(text, _FOCUS_PHRASES):
        phrase, after = match.group(), text[match.end():]
        if phrase == "怎么" and (not after.startswith(_HOW_TO_VERBS) or re.search("了|这么|那么", after)):
            continue            # 怎么还不到账 asks why: 为什么 would be a synonym
        if not after or not "\u4e00" <= after[0] <= "\u9fff":
            continue            # 是为什么？ / 在哪里: no verb after it to ask another thing about
        focus = _FOCUS_OF[phrase]
        targets = [phrases[0] for f, phrases in QUESTION_FOCUS.items() if f != focus]
        if after.startswith(("不", "没")):
            targets = [t for t in targets if t != "如何"]        # 如何不能 asks nothing
        candidates += [(match, t) for t in targets]
    if not candidates:
        return None
    match, new = rng.choice(candidates)
    return _pair(text, _replace(text, match.start(), match.end(), new), 0, "question")


# Times and places of one kind; a word may become another of its class (the same day under two
# names, 周一 / 星期一, is one: SAME_SETTING).
SETTING_CLASSES = {
    "part_of_day": ("早上", "上午", "中午", "下午", "晚上", "凌晨", "半夜"),
    "week": ("本周", "下周", "上周"),
    "weekday": ("周一", "周二", "周三", "周四", "周五", "周六", "周日", "星期一", "星期二", "星期三", "星期四",
                "星期五", "星期六", "星期天", "星期日"),
    "month_part": ("月初", "月中", "月底"),
    "place": ("机场", "火车站", "高铁站", "汽车站", "地铁站", "医院", "酒店", "学校", "公司", "超市", "商场", "公园",
              "银行网点", "营业厅"),
    "scope": ("国内", "国外"),
    "border": ("境内", "境外"),
    "channel": ("线上", "线下"),
    "province": ("省内", "省外"),
}
# A place word counts only after one of these (去机场, 在医院, 到火车站).
_TO_A_PLACE = ("去", "到", "在", "从", "回", "离", "往", "进")
_SETTING_OF = {w: cls for cls, words in SETTING_CLASSES.items() for w in words}
_SETTINGS = _compile(_SETTING_OF)


def _same_setting(a: str, b: str) -> bool:
    day = {"星期天": "周日", "星期日": "周日"}
    a, b = day.get(a, a.replace("星期", "周")), day.get(b, b.replace("星期", "周"))
    return a == b


def change_setting(text: str, rng: random.Random) -> GeneratedPair | None:
    """A time of day, week, weekday or place becomes another of its class (label 0).

    >>> change_setting("明天早上去机场", random.Random(0)).text2
    '明天早上去营业厅'
    """
    candidates = []
    for match in _tokens(text, _SETTINGS):
        word = match.group()
        if _SETTING_OF[word] == "place" and not text[:match.start()].endswith(_TO_A_PLACE):
            continue            # 专科学校, 劳务公司: part of a name, not a place one goes to
        others = [w for w in SETTING_CLASSES[_SETTING_OF[word]] if w not in text and not _same_setting(w, word)]
        if others:
            candidates.append((match, others))
    if not candidates:
        return None
    match, others = rng.choice(candidates)
    return _pair(text, _replace(text, match.start(), match.end(), rng.choice(others)), 0, "setting")


# -------------------------------------------------------------- positives

# Groups of phrases that mean the same here; each may replace any other of its group.
SYNONYM_GROUPS = (
    ("为什么", "为何", "为啥"),
    ("什么时候", "何时"),
    ("多久", "多长时间"),
    ("多少钱", "什么价格"),
    ("截图", "截屏"),
    ("苹果手机", "iPhone"),
    ("手机号", "手机号码"),
    ("还款", "还钱"),
    ("借款", "借钱"),
    ("储蓄卡", "借记卡"),
    ("修改", "更改"),
    ("取消", "撤销"),
    ("哪里", "哪儿"),
    ("马上", "立刻", "立即"),
    ("到账", "到帐"),
    ("账户", "帐户"),
    ("账号", "帐号"),
    ("提高", "提升"),
    ("关闭", "关掉"),
    ("删除", "删掉"),
    ("照片", "相片"),
    ("妈妈", "母亲"),
    ("爸爸", "父亲"),
)
# One way only: 可以 → 能 keeps the meaning where 可以 is the modal (能 is also part of many words);
# 如何 and 怎样 always ask how, 怎么 also asks why (怎么显示系统繁忙): it is a target, and a source
# only before the verbs of a how-to question (below).
ONE_WAY_SYNONYMS = {"可以": ("能",), "如何": ("怎样", "怎么"), "怎样": ("如何", "怎么"), "怎么": ("如何", "怎样")}
_HOW_TO_VERBS = ("才能", "才可以", "办理", "开通", "申请", "使用", "设置", "操作", "还款", "修改", "更改", "注销", "查询",
                 "查看", "绑定", "解绑", "充值", "提现", "付款", "支付", "退款", "下载", "安装", "登录", "注册", "激活",
                 "联系", "投诉", "分期", "转账", "截图", "截屏", "更换", "改", "换", "找回", "关闭", "取消", "删除", "退出",
                 "用", "做", "买", "去", "走", "写", "读", "画")

# Where a listed phrase is followed by one of these, it is another word or means something else:
# 怎么样 (how is it), 怎么办, 怎么回事, and 怎么 + adverb or negation = "why" (怎么还不到账).
_NOT_BEFORE = {
    "怎样": ("了", "的", "呢", "吗", "啊"),
    "如何": ("了", "呢", "吗", "啊"),
    "可以": ("吗", "吧", "了", "的", "啊", "呢"),
}
# 借了多少钱 asks an amount, not a price; 还可以 (not bad) is no modal.
_NOT_AFTER = {"多少钱": tuple("借还欠转存取充扣收付花赚有要交赔罚退了能提贷领缴给省挣拿打汇用"), "可以": ("还", "不")}
_MONEY_TALK = re.compile("借|还|贷|欠|额度|花呗|利息|费|扣|存|取|转|充|付|退|赔|罚|最高|最多|最低|一共|总共")

_SYNONYM_OF = {}
for _group in SYNONYM_GROUPS:
    for _word in _group:
        _SYNONYM_OF[_word.lower()] = tuple(w for w in _group if w != _word)
for _word, _others in ONE_WAY_SYNONYMS.items():
    _SYNONYM_OF[_word] = _others
_SYNONYMS = _compile(_SYNONYM_OF)


def substitute_synonym(text: str, rng: random.Random) -> GeneratedPair | None:
    """One phrase replaced by a true synonym from the table (label 1).

    >>> substitute_synonym("怎么截图", random.Random(0)).text2
    '怎么截屏'
    >>> substitute_synonym("怎么还不到账", random.Random(0)).text2          # 怎么 here means why: only 到账 → 到帐
    '怎么还不到帐'
    """
    candidates = []
    for match in _tokens(text, _SYNONYMS):
        word = match.group()
        key = word.lower()
        after, before = text[match.end():], text[:match.start()]
        if key in _NOT_BEFORE and (not after or after.startswith(_NOT_BEFORE[key])):
            continue
        if key in _NOT_AFTER and before.endswith(_NOT_AFTER[key]):
            continue
        if key == "怎么" and (not after.startswith(_HOW_TO_VERBS) or re.search("了|这么|那么", after)):
            continue                # 怎么提额这么慢, 怎么关闭了: why, not how
        if key == "多少钱" and _MONEY_TALK.search(text):
            continue                # 花呗最高多少钱 asks a limit, 借了多少钱 an amount: not a price
        candidates.append(match)
    if not candidates:
        return None
    match = rng.choice(candidates)
    new = rng.choice(_SYNONYM_OF[match.group().lower()])
    return _pair(text, _replace(text, match.start(), match.end(), new), 1, "synonym")


# 亲 only as a greeting (亲，… / 亲我的… / 亲怎么…), not in 亲戚, 亲人.
_POLITE_PREFIX = re.compile(r"^(你好|您好|请问|亲(?=[，,、！!。\s]|请问|我|你|怎|为|能|可|有|在|花|借))[，,、！!。.\s]*"
                            r"(请问)?[，,、！!。.\s]*")
_MODALS = ("可以", "能")


_SYMMETRIC_MARKER = re.compile("和|与|跟")
# After the second entity, what makes the question symmetric in the two (跟 alone can mean "from":
# 我跟他借钱 is not 他跟我借钱, so a bare continuation never counts).
_SYMMETRIC_QUESTION = re.compile(r"(的|之间|两者|两个|这两个|相比)?(有什么|有啥|有何|的)?"
                                 r"(区别|不同|差别|异同|哪个|哪家|哪种|哪一个|谁|什么关系|关系|一样|相同|的距离|距离|"
                                 r"比较|对比|比哪个|能同时|可以同时|同时|都|有多远|多远)")


def swap_symmetric(text: str, rng: random.Random) -> GeneratedPair | None:
    """Two entities of one class around 和 / 与 / 跟, before a symmetric question, trade places
    (label 1: the same question).

    >>> swap_symmetric("花呗和借呗有什么区别", random.Random(0)).text2
    '借呗和花呗有什么区别'
    >>> swap_symmetric("我跟他借钱", random.Random(0)) is None
    True
    """
    candidates = []
    for left, right, _ in _neighbour_entities(text):
        marker = _SYMMETRIC_MARKER.fullmatch(text, left.end(), right.start())
        if marker and _SYMMETRIC_QUESTION.match(text, right.end()):
            candidates.append((left.start(), right.end(), right.group() + marker.group() + left.group()))
    return _swapped(text, candidates, rng, 1, "symmetric")


def edit_surface(text: str, rng: random.Random) -> GeneratedPair | None:
    """A polite prefix added or removed, or a trailing particle added, keeping the question (label 1).

    >>> edit_surface("花呗怎么还款", random.Random(0)).text2
    '花呗怎么还款啊'
    """
    body, tail = _split_tail(text)
    if not body:
        return None
    edits = []
    prefix = _POLITE_PREFIX.match(body)
    if prefix and len(body) - prefix.end() >= 4:
        edits.append(text[prefix.end():])
    elif not prefix:
        edits += ["请问" + text, "你好，" + text]
    if body[-1] not in _PARTICLES and "\u4e00" <= body[-1] <= "\u9fff":
        if _has_question_word(body) and not _is_yes_no_question(text):
            edits += [body + "呢" + tail, body + "啊" + tail]
        elif not _has_question_word(body) and any(m in body for m in _MODALS) and len(body) <= 12 \
                and body[-1] != "的" and not _NEGATION_CHARS.search(body) and not _is_yes_no_question(text):
            edits.append(body + "吗" + tail)
    if not edits:
        return None
    return _pair(text, rng.choice(edits), 1, "surface")


GENERATORS: dict[str, Callable[[str, random.Random], GeneratedPair | None]] = {
    "swap": swap_roles, "number": change_number, "entity": change_entity, "negation": flip_negation,
    "synonym": substitute_synonym, "surface": edit_surface, "symmetric": swap_symmetric,
    "antonym": change_antonym, "question": change_question, "setting": change_setting,
}


# Questions written around the swap markers, whose entities the recipe fills in (``--framed-questions``):
# the bank corpora hold few questions with two entities of one class, so swap_roles finds 176 in
# 270,000 training texts, too few for a network to learn that 张三欠李四 is not 李四欠张三.  Each
# frame holds one asymmetric marker of SWAP_MARKERS (label 0 when swapped) or 和 / 与 / 跟 before a
# symmetric question (label 1); the entities come from SWAP_CLASSES.
SWAP_FRAMES = {
    "city": ("{A}到{B}的高铁票多少钱", "{A}到{B}的机票什么时候便宜", "{A}到{B}坐火车要多久", "{A}飞{B}的航班有哪些",
             "{A}去{B}自驾怎么走", "{A}到{B}有多少公里", "{A}开往{B}的动车几点发车", "从{A}到{B}怎么坐车最快",
             "{A}到{B}的快递几天能到", "{A}和{B}哪个城市更适合工作", "{A}和{B}之间有多远", "{A}跟{B}哪个冷",
             "{A}与{B}哪个房价高"),
    "person": ("{A}欠{B}的钱不还怎么办", "{A}转账给{B}能撤回吗", "{A}借给{B}的钱要不回来了", "{A}比{B}大几岁",
               "{A}还给{B}的钱怎么查记录", "{A}发给{B}的红包怎么退回", "{A}喜欢{B}怎么办", "{A}打钱给{B}多久到账",
               "{A}和{B}是什么关系", "{A}和{B}谁的额度高", "{A}跟{B}的账户能同时用吗"),
    "account": ("{A}转到{B}要手续费吗", "{A}提现到{B}多久到账", "{A}转入{B}有上限吗", "用{A}还{B}可以吗",
                "{A}充值到{B}怎么操作", "{A}比{B}利息高吗", "{A}转账到{B}失败怎么办",
                "{A}和{B}有什么区别", "{A}与{B}哪个利息低", "{A}跟{B}能同时开通吗", "{A}和{B}的区别是什么"),
}


def framed_questions(count: int, rng: random.Random) -> list[str]:
    """``count`` questions from :data:`SWAP_FRAMES`, each with two different entities of its class."""
    frames = [(cls, frame) for cls, group in SWAP_FRAMES.items() for frame in group]
    out = []
    for _ in range(count):
        cls, frame = rng.choice(frames)
        a, b = rng.sample(SWAP_CLASSES[cls], 2)
        while a in b or b in a:                  # 借呗 / 蚂蚁借呗: one product, no direction to swap
            a, b = rng.sample(SWAP_CLASSES[cls], 2)
        out.append(frame.format(A=a, B=b))
    return out


# ------------------------------------------------------------------ drawing

def augmented_pairs(questions: Iterable[str], rng: random.Random, count: int, *, kinds: Sequence[str] = KINDS,
                    positive_share: float = 0.5, exclude: Collection[str] = (),
                    generators: dict | None = None) -> list[GeneratedPair]:
    """Up to ``count`` generated pairs from ``questions``: ``positive_share`` of them paraphrase
    positives, the rest hard negatives, each label's share drawn in turn from its ``kinds`` (a kind
    that runs out of questions leaves its turns to the others of its label).

    Each kind walks its own shuffle of the distinct questions, so one question can give a pair of
    several kinds.  No pair is returned twice (in either order), and none has a text whose
    :func:`model_text` is in ``exclude`` (texts of evaluation splits).  Fewer than ``count`` come
    back when the questions do not allow more.  ``generators`` adds kinds of its own (kind -> edit,
    such as ``lexicon.LexiconEdits.generators()``), each a negative or a positive kind as
    ``lexicon.LEXICON_NEGATIVE_KINDS`` says.

    >>> for pair in augmented_pairs(["北京到上海多少钱", "花呗怎么还款"], random.Random(0), 4):
    ...     print(*pair)
    北京到上海多少钱 上海到北京多少钱 0 swap
    北京到上海多少钱 北京到无锡多少钱 0 entity
    北京到上海多少钱 北京到上海什么价格 1 synonym
    花呗怎么还款 你好，花呗怎么还款 1 surface
    """
    generators = {**GENERATORS, **(generators or {})}
    negative_kinds = NEGATIVE_KINDS + LEXICON_NEGATIVE_KINDS
    positive_kinds = POSITIVE_KINDS + LEXICON_POSITIVE_KINDS
    unknown = [k for k in kinds if k not in generators]
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    if count < 0 or not 0.0 <= positive_share <= 1.0:
        raise ValueError(f"count must be >= 0 and positive_share in [0, 1], got {count}, {positive_share}")
    distinct = list(dict.fromkeys(q.strip() for q in questions if q and q.strip()))
    excluded = set(exclude)
    seen: set[tuple[str, str]] = set()

    def stream(kind: str) -> Iterator[GeneratedPair]:
        order = distinct[:]
        rng.shuffle(order)
        for question in order:
            if model_text(question) in excluded:
                continue
            pair = generators[kind](question, rng)
            if pair is None:
                continue
            a, b = model_text(pair.text1), model_text(pair.text2)
            key = (a, b) if a <= b else (b, a)
            if b in excluded or key in seen:
                continue
            seen.add(key)
            yield pair

    positives = round(count * positive_share)
    out = []
    for label_kinds, wanted in (([k for k in kinds if k in negative_kinds], count - positives),
                                ([k for k in kinds if k in positive_kinds], positives)):
        streams = {kind: stream(kind) for kind in label_kinds}
        drawn = 0
        while drawn < wanted and streams:
            for kind in list(streams):
                if drawn >= wanted:
                    break
                pair = next(streams[kind], None)
                if pair is None:
                    del streams[kind]
                    continue
                out.append(pair)
                drawn += 1
    return out


# The held-out set of such pairs (dev/README.md); the recipe keeps its texts out of generated training pairs.
SWAP_DEV = Path(__file__).parent / "dev" / "swap_dev.tsv"


def generated_training_pairs(training: Iterable[tuple[str, str, int]], held_out: Iterable[tuple[str, str, int]],
                             count: int, seed: int, framed: int = 0,
                             kinds: Sequence[str] | None = None) -> list[GeneratedPair]:
    """What the recipe's ``--hard-negatives`` adds: ``count`` pairs generated from the texts of the
    ``training`` pairs, half hard negatives and half paraphrases, with no text of a ``held_out``
    pair (selection, report and swap-dev pairs), drawn with ``random.Random(seed)``.  With
    ``framed`` (``--framed-questions``), that many :func:`framed_questions` join the texts and the
    ``symmetric`` kind joins the draw; ``kinds`` (``--kinds``) names the kinds drawn instead."""
    exclude = {model_text(t) for pair in held_out for t in pair[:2]}
    questions = [t for pair in training for t in pair[:2]]
    if framed:
        questions += framed_questions(framed, random.Random(seed + 1))
    if kinds is None:
        kinds = FRAMED_KINDS if framed else KINDS
    return augmented_pairs(questions, random.Random(seed), count, kinds=kinds, exclude=exclude)


FIELDS = ("text_a", "text_b", "label", "kind")


def write_generated(path: str | Path, pairs: Iterable[GeneratedPair]) -> None:
    """A ``text_a<TAB>text_b<TAB>label<TAB>kind`` file with a header (readable by ``data.read_pairs``)."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write("\t".join(FIELDS) + "\n")
        for pair in pairs:
            if any(c in "\t\n\r" for c in pair.text1 + pair.text2):
                raise ValueError(f"a tab or line break inside a text: {pair}")
            handle.write(f"{pair.text1}\t{pair.text2}\t{pair.label}\t{pair.kind}\n")


def read_generated(path: str | Path) -> list[GeneratedPair]:
    """The pairs of a file written by :func:`write_generated`."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    pairs = []
    for number, row in enumerate(rows, 2):
        if row.get("label") not in ("0", "1") or row.get("kind") not in KINDS:
            raise ValueError(f"{path}:{number}: expected text_a, text_b, a 0/1 label and a kind of {KINDS}, got {row}")
        pairs.append(GeneratedPair(row["text_a"], row["text_b"], int(row["label"]), row["kind"]))
    return pairs
