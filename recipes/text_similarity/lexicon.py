"""Minimal pairs from word lexicons, each lexicon split into generator words and held-out words.

The matching corpora say little about which one-word changes flip a question (antonyms, negation)
and which keep it (synonyms, politeness and function words, a harmless change of order).  Three
lexicons carry that knowledge (``../shared/data/lexicon``, research-use resources, see its README):
HIT Cilin extended (synonym groups, ``=`` relation only), two antonym lists (pairs found in both,
none flagged as likely synonyms) and two negation lists (negation words, not the false negations
such as 不错).

**The split.**  Every word is held out or not by the hash of its text
(:func:`held_out`: md5 of the UTF-8 word, modulo 5; one word in five is held out), so the split is
the same on every machine and for every lexicon.  A pair of words (a synonym or an antonym pair) is
a generator pair only when **neither** word is held out, and a check pair when **either** is: no
held-out word is ever written by a generator.  The same split applies to the small word classes
written here (times of day, weekdays, places, politeness and function words, person names).

:class:`LexiconEdits` holds one side (``"generator"``: the recipe's ``--lexicon`` training pairs;
``"held_out"``: ``dev/make_lexicon_check.py``) and edits a text at a jieba token:

* ``lex_antonym`` (label 0): a word becomes its antonym (打开 → 关闭, 增加 → 减少);
* ``lex_negation`` (label 0): a negation word is dropped or a negated verb loses its negation
  (不想 → 想, 没有 → 有, 无法 → 能), outside yes/no questions, where both readings ask the same;
* ``lex_time`` / ``lex_place`` (label 0): a time word or a place after 去/到/在/从 becomes another
  of its class;
* ``lex_synonym`` (label 1): a word becomes another of its Cilin synonym group;
* ``function`` (label 1): a politeness phrase is added or dropped, or a trailing particle added;
* ``reorder`` (label 1): a time word before the subject moves after it (明天我去北京 / 我明天去北京).

Each edit returns an :class:`augment.GeneratedPair` or ``None`` where it does not apply, its
choices drawn from the ``rng``.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
from functools import cached_property
from pathlib import Path

from typing import NamedTuple

from taskflow.tasks.text_similarity.features import model_text


class GeneratedPair(NamedTuple):
    """One generated pair: its texts, its label (1 the same question, 0 not) and the edit's kind."""

    text1: str
    text2: str
    label: int
    kind: str

LEXICON_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "lexicon"
HELD_OUT_SHARE = 5          # one word in five
SIDES = ("generator", "held_out")
LEXICON_KINDS = ("lex_antonym", "lex_negation", "lex_time", "lex_place", "lex_synonym", "function", "reorder")
LEXICON_NEGATIVE_KINDS = ("lex_antonym", "lex_negation", "lex_time", "lex_place")
LEXICON_POSITIVE_KINDS = ("lex_synonym", "function", "reorder")

_HAN = re.compile(r"^[\u4e00-\u9fff]+$")
CONTENT_POS = "vad"          # jieba's POS classes a word may be replaced in: verbs, adjectives, adverbs
# A negated single-char verb or modal whose plain form reads as a word (不想 -> 想); 不足 -> 足 does not.
PLAIN_VERBS = set("想要会能行用去来到是在看说听吃喝买卖对够懂知信让给找做")


def held_out(word: str) -> bool:
    """Whether ``word`` is kept for the check (md5 of its UTF-8 text, one in :data:`HELD_OUT_SHARE`)."""
    return int(hashlib.md5(word.encode("utf-8")).hexdigest(), 16) % HELD_OUT_SHARE == 0


def on_side(words, side: str) -> bool:
    """A word (or a pair, given as several words) belongs to ``side``: the generator's when none is
    held out, the check's when any is."""
    if side not in SIDES:
        raise ValueError(f"side is one of {SIDES}, got {side!r}")
    any_held = any(held_out(w) for w in words)
    return any_held if side == "held_out" else not any_held


# Small word classes the lexicons lack, split by the same hash.  Members of a class are different
# times or places (a change is a contrast); 周一 and 星期一 are one day and never replace each other.
TIME_CLASSES = {
    "day": ("今天", "明天", "昨天", "后天", "前天", "大后天"),
    "part_of_day": ("早上", "上午", "中午", "下午", "傍晚", "晚上", "凌晨", "半夜", "深夜"),
    "week": ("这周", "上周", "下周", "本周", "这个星期", "上个星期", "下个星期"),
    "weekday": ("周一", "周二", "周三", "周四", "周五", "周六", "周日", "星期一", "星期二", "星期三", "星期四",
                "星期五", "星期六", "星期天"),
    "month": ("这个月", "上个月", "下个月", "本月", "月初", "月底", "月中"),
    "year": ("今年", "去年", "明年", "前年", "后年"),
    "season": ("春天", "夏天", "秋天", "冬天"),
    "holiday": ("春节", "国庆", "中秋", "元旦", "端午", "清明", "五一"),
}
PLACE_CLASSES = {
    "city": ("北京", "上海", "广州", "深圳", "杭州", "南京", "重庆", "武汉", "天津", "苏州", "长沙", "郑州", "青岛",
             "厦门", "沈阳", "成都", "西安", "大连", "宁波", "无锡", "昆明", "济南", "合肥", "福州", "南昌", "贵阳",
             "南宁", "兰州", "太原", "石家庄", "哈尔滨", "长春", "海口", "三亚", "珠海", "佛山", "东莞", "温州",
             "烟台", "洛阳", "桂林", "丽江", "拉萨", "呼和浩特", "乌鲁木齐", "银川", "西宁"),
    "venue": ("机场", "火车站", "高铁站", "汽车站", "地铁站", "医院", "学校", "公司", "超市", "商场", "公园",
              "银行", "酒店", "图书馆", "电影院", "体育馆", "博物馆", "动物园", "菜市场", "药店", "餐厅", "健身房"),
    "room": ("客厅", "卧室", "厨房", "书房", "阳台", "卫生间", "办公室", "会议室"),
    "country": ("中国", "美国", "日本", "韩国", "英国", "法国", "德国", "泰国", "新加坡", "澳大利亚", "加拿大",
                "俄罗斯", "意大利", "西班牙", "越南", "印度"),
}
TO_A_PLACE = ("去", "到", "在", "从", "回", "离", "往", "飞", "住", "来")
# Politeness and function words that do not change what is asked: prefixes, and trailing particles.
POLITE_PREFIXES = ("请问", "你好，", "您好，", "麻烦问一下", "想问一下", "请教一下", "打扰一下，", "问一下",
                   "我想问下", "亲，", "朋友们，", "各位，", "大家好，", "求助，", "急，", "咨询一下，")
POLITE_SUFFIXES = ("，谢谢", "，谢谢了", "，多谢", "，求解答", "，在线等", "，急", "，求告知", "，麻烦了")
TRAILING_PARTICLES = ("呢", "啊", "呀", "哈", "哦")
PERSON_NAMES = ("王芳", "刘洋", "陈静", "李娜", "张伟", "王磊", "赵敏", "孙浩", "周杰", "吴琳", "郑爽", "马丽",
                "黄强", "林涛", "何平", "高飞", "罗兰", "梁宇", "宋佳", "唐宁", "许晴", "邓超", "韩梅", "冯军",
                "曹阳", "彭博", "曾静", "萧然", "田甜", "董明", "袁野", "潘婷", "蒋欣", "蔡琴", "余杰", "杜鹃")

QUESTION_TAIL = re.compile(r"[吗嘛么吧]\s*[？?]?$|是否|能否|可否|有没有|是不是|能不能|会不会|可不可以|要不要|好不好")


def _split_words(words, side):
    return tuple(w for w in words if on_side((w,), side))


class LexiconEdits:
    """The lexicon edits of one ``side`` (``"generator"`` or ``"held_out"``), reading ``directory``
    (``../shared/data/lexicon``).  Tokens come from jieba (with its HMM), so a word is replaced only
    where it stands as a word (高 in 高铁 is no adjective)."""

    def __init__(self, directory: str | Path = LEXICON_DIR, side: str = "generator"):
        if side not in SIDES:
            raise ValueError(f"side is one of {SIDES}, got {side!r}")
        self.directory, self.side = Path(directory), side
        missing = [p for p in ("cilin/cilin_ex.tsv", "antonyms/guotong1988/antonyms.tsv",
                               "antonyms/chineseantiword/antonyms.tsv", "negation/negation_guotong1988.tsv",
                               "negation/negation_davion.tsv", "jieba_dict_small/dict_small.tsv")
                   if not (self.directory / p).is_file()]
        if missing:
            raise SystemExit(f"lexicon files missing under {self.directory}: {', '.join(missing)}")
        self._cut, self._tokens = None, {}

    # ------------------------------------------------------------ the lexicons

    def _rows(self, relative: str) -> list[dict]:
        with open(self.directory / relative, encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))

    @cached_property
    def common_words(self) -> dict[str, str]:
        """jieba's small dictionary: word -> POS, for words seen at least 20 times there."""
        return {r["term"]: r["pos"] for r in self._rows("jieba_dict_small/dict_small.tsv")
                if r["freq"].isdigit() and int(r["freq"]) >= 20}

    @cached_property
    def antonyms(self) -> dict[str, tuple[str, ...]]:
        """word -> its antonyms: pairs in both lists, neither flagged as a likely synonym, both words of
        2-4 Han chars, verbs, adjectives or adverbs in jieba's dictionary (nouns' "opposites" are mostly
        other things: 朋友/敌人 in a game's name), the pair on this side."""
        def pairs(relative):
            return {tuple(sorted((r["word1"], r["word2"]))) for r in self._rows(relative)
                    if not r["flag"] and r["word1"] != r["word2"]}
        both = pairs("antonyms/guotong1988/antonyms.tsv") & pairs("antonyms/chineseantiword/antonyms.tsv")
        out: dict[str, tuple[str, ...]] = {}
        for a, b in sorted(both):
            if all(_HAN.match(w) and 2 <= len(w) <= 4 and self.common_words.get(w, "x")[:1] in CONTENT_POS
                   for w in (a, b)) and on_side((a, b), self.side):
                out[a] = out.get(a, ()) + (b,)
                out[b] = out.get(b, ()) + (a,)
        return out

    @cached_property
    def synonyms(self) -> dict[str, tuple[str, ...]]:
        """word -> its synonyms: Cilin ``=`` groups of at most 6 words, words of 2-4 Han chars in jieba's
        dictionary as verbs, adjectives or adverbs of one POS class (Cilin's noun groups are loose: 世界 /
        圈子, 孕妇 / 产妇), of one length and sharing a char (修改 / 更改, 提高 / 提升: a word's other
        senses put it in groups whose other words share nothing with it, 好看 / 为难), never an antonym pair, the pair on this side."""
        antonym_pairs = set()
        for relative in ("antonyms/guotong1988/antonyms.tsv", "antonyms/chineseantiword/antonyms.tsv"):
            antonym_pairs |= {frozenset((r["word1"], r["word2"])) for r in self._rows(relative)}
        out: dict[str, tuple[str, ...]] = {}
        for row in self._rows("cilin/cilin_ex.tsv"):
            words = row["words"].split()
            if row["relation"] != "=" or len(words) > 6:
                continue
            words = [w for w in words if _HAN.match(w) and 2 <= len(w) <= 4
                     and self.common_words.get(w, "x")[:1] in CONTENT_POS]
            for a in words:
                for b in words:
                    if a != b and self.common_words[a][:1] == self.common_words[b][:1] \
                            and frozenset((a, b)) not in antonym_pairs and a not in b and b not in a \
                            and len(a) == len(b) and set(a) & set(b) \
                            and on_side((a, b), self.side):
                        out[a] = out.get(a, ()) + (b,)
        return out

    @cached_property
    def negations(self) -> dict[str, str]:
        """negation word -> what the text says without it: 不想 -> 想, 没有 -> 有, 无法 -> 能, 不 / 没
        / 别 -> nothing; only words on this side, never an A-not-A form (好不好)."""
        words = {r["word"] for r in self._rows("negation/negation_guotong1988.tsv") if r["class"] == "0"}
        words |= {r["word"] for r in self._rows("negation/negation_davion.tsv")}
        special = {"不": "", "没": "", "别": "", "未": "已", "无法": "能", "不能": "能", "没法": "能", "从未": "曾经",
                   "从没": "曾经", "尚未": "已经", "还没": "已经", "还没有": "已经", "并未": "已经", "没有": "有"}
        out = {}
        for word in sorted(words):
            if not _HAN.match(word) or re.search(r"(.)[不没]\1", word) or not on_side((word,), self.side):
                continue
            if word in special:
                out[word] = special[word]
            elif len(word) in (2, 3) and word[0] in "不没" and (word[1:] in PLAIN_VERBS or (
                    len(word) == 3 and self.common_words.get(word[1:], "x")[:1] == "v")):
                out[word] = word[1:]          # 不想 -> 想, 不需要 -> 需要, 没用 is no verb: skipped
        return out

    def _classes(self, classes: dict) -> dict[str, tuple[str, ...]]:
        """Each word of a class -> the other words of its class, the pair on this side."""
        out = {}
        for words in classes.values():
            for w in words:
                others = tuple(o for o in words if o != w and not _same_day(o, w) and on_side((w, o), self.side))
                if others:
                    out[w] = others
        return out

    @cached_property
    def times(self):
        return self._classes(TIME_CLASSES)

    @cached_property
    def places(self):
        return self._classes(PLACE_CLASSES)

    @cached_property
    def prefixes(self):
        return _split_words(POLITE_PREFIXES, self.side)

    @cached_property
    def suffixes(self):
        return _split_words(POLITE_SUFFIXES, self.side)

    @cached_property
    def particles(self):
        return _split_words(TRAILING_PARTICLES, self.side)

    @cached_property
    def names(self):
        return _split_words(PERSON_NAMES, self.side)

    def counts(self) -> dict[str, int]:
        """How many words each edit may replace on this side (what the manifest records)."""
        return {"antonym_words": len(self.antonyms), "synonym_words": len(self.synonyms),
                "negation_words": len(self.negations), "time_words": len(self.times),
                "place_words": len(self.places), "polite_phrases": len(self.prefixes) + len(self.suffixes),
                "particles": len(self.particles)}

    # ------------------------------------------------------------ the edits

    def tokens(self, text: str) -> list[tuple[int, int, str]]:
        """jieba's words of ``text`` as ``(start, end, word)``, kept for the next edit of the same text."""
        if text not in self._tokens:
            if self._cut is None:
                import jieba

                jieba.setLogLevel(60)
                self._cut = jieba.tokenize
            self._tokens[text] = [(start, end, word) for word, start, end in self._cut(text)]
        return self._tokens[text]

    def _replace_token(self, text, rng, table, label, kind, allowed=lambda text, start, end: True):
        candidates = [(s, e, w) for s, e, w in self.tokens(text) if w in table and allowed(text, s, e)]
        if not candidates:
            return None
        start, end, word = rng.choice(candidates)
        others = [o for o in table[word] if o not in text]
        if not others:
            return None
        return _pair(text, text[:start] + rng.choice(others) + text[end:], label, kind)

    def antonym(self, text: str, rng: random.Random):
        return self._replace_token(text, rng, self.antonyms, 0, "lex_antonym")

    def synonym(self, text: str, rng: random.Random):
        return self._replace_token(text, rng, self.synonyms, 1, "lex_synonym")

    def time(self, text: str, rng: random.Random):
        return self._replace_token(text, rng, self.times, 0, "lex_time")

    def place(self, text: str, rng: random.Random):
        tokens = self.tokens(text)
        after_a_verb = {s for (_, _, w), (s, _, _) in zip(tokens, tokens[1:]) if w in TO_A_PLACE}
        return self._replace_token(text, rng, self.places, 0, "lex_place",
                                   lambda t, s, e: s in after_a_verb or (s == 0 and t[e:].startswith(("到", "飞"))))

    def negation(self, text: str, rng: random.Random):
        if QUESTION_TAIL.search(text) or "还是" in text:
            return None                 # 能不能 / …吗: with or without the negation, one yes/no question
        candidates = [(s, e, w) for s, e, w in self.tokens(text) if w in self.negations]
        if len(candidates) != 1:
            return None                 # none, or a double negative
        start, end, word = candidates[0]
        rest = text[end:]
        if word == "别" and not (start == 0 or text[:start].endswith(("你", "请", "千万", "可", "，"))):
            return None                 # 用发簪别头发: 别 as a verb, not "don't"
        if not rest or not "\u4e00" <= rest[0] <= "\u9fff":
            return None
        return _pair(text, text[:start] + self.negations[word] + rest, 0, "lex_negation")

    def function(self, text: str, rng: random.Random):
        body = text.rstrip("？?。.！! ")
        if len(body) < 4:
            return None
        edits = []
        for prefix in self.prefixes:
            if text.startswith(prefix):
                rest = text[len(prefix):]
                if len(rest) >= 4:
                    edits.append(rest)
                break
        else:
            edits += [p + text for p in self.prefixes]
        edits += [body + s for s in self.suffixes if not body.endswith(s)]
        if body[-1] not in "吗呢啊呀吧嘛么哦啦哈" and re.search("什么|怎么|怎样|如何|为什么|哪|谁|多少|几|多久", body) \
                and not QUESTION_TAIL.search(body):
            edits += [body + p for p in self.particles]
        if not edits:
            return None
        return _pair(text, rng.choice(edits), 1, "function")

    def reorder(self, text: str, rng: random.Random):
        """A time word before a pronoun subject moves after it, or after it moves before it."""
        tokens = self.tokens(text)
        for (s1, e1, w1), (s2, e2, w2) in zip(tokens, tokens[1:]):
            if w1 in self.times and w2 in ("我", "你", "他", "她", "我们", "你们", "他们", "咱们"):
                return _pair(text, text[:s1] + w2 + w1 + text[e2:], 1, "reorder")
            if w2 in self.times and w1 in ("我", "你", "他", "她", "我们", "你们", "他们", "咱们") and s1 == 0:
                return _pair(text, w2 + w1 + text[e2:], 1, "reorder")
        return None

    def generators(self) -> dict:
        """kind -> edit, as ``augment.augmented_pairs`` takes them."""
        return {"lex_antonym": self.antonym, "lex_negation": self.negation, "lex_time": self.time,
                "lex_place": self.place, "lex_synonym": self.synonym, "function": self.function,
                "reorder": self.reorder}


def _same_day(a: str, b: str) -> bool:
    day = {"星期天": "周日", "星期日": "周日"}
    return day.get(a, a.replace("星期", "周")) == day.get(b, b.replace("星期", "周")) or {a, b} == {"这周", "本周"} \
        or {a, b} == {"这个月", "本月"} or {a, b} == {"这周", "这个星期"} or {a, b} == {"本周", "这个星期"} \
        or {a, b} == {"上周", "上个星期"} or {a, b} == {"下周", "下个星期"}


def _pair(text: str, new: str, label: int, kind: str):
    if not new.strip() or model_text(new) == model_text(text):
        return None
    return GeneratedPair(text, new, label, kind)
