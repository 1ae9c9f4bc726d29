"""The WordTag categories taskflow gives, their hierarchy, and how LAC tags map onto them.

Pure Python: imported by the task, the recipe and the benchmark alike.
"""

from __future__ import annotations

__all__ = [
    "CATEGORIES", "TOP_TYPES", "NOUN_CLASSES", "ENTITY_CATEGORIES", "LAC_TO_WORDTAG",
    "CANDIDATES", "FUNCTION_WORDS", "top_type", "termid",
]

# category -> top type of the term hierarchy (the prefix of a term id).  Every
# category taskflow can output is here; see README.md for where each comes from.
TOP_TYPES: dict[str, str] = {
    "人物类_实体": "人物", "人物类_概念": "人物",
    "作品类_实体": "作品与出版物", "作品类_概念": "作品与出版物",
    "组织机构类": "组织机构", "组织机构类_企事业单位": "组织机构",
    "品牌名": "品牌",
    "物体类": "物体", "物体类_兵器": "物体",
    "场所类": "场所",
    "世界地区类": "世界地区",
    "位置方位": "位置方位",
    "饮食类": "饮食", "饮食类_菜品": "饮食",
    "生物类": "生物", "生物类_动物": "生物", "生物类_植物": "生物",
    "医学术语类": "医学术语", "药物类": "医学术语", "疾病损伤类": "医学术语",
    "术语类": "术语",
    "文化类": "文化",
    "事件类": "事件",
    "时间类": "时间",
    "数量词": "数量词",
    "修饰词": "修饰词",
    "场景事件": "场景事件",
    "词汇用语": "词汇用语",
    "介词": "介词", "助词": "助词", "代词": "代词", "连词": "连词", "副词": "副词",
    "疑问词": "疑问词", "肯定词": "肯定词", "否定词": "否定词",
    "语气词": "语气词", "拟声词": "拟声词", "叹词": "叹词",
    "外语单词": "外语单词",
    "w": "w",
}
CATEGORIES: tuple[str, ...] = tuple(TOP_TYPES)

# What the category classifier chooses among (nouns and names the tree does not settle).
NOUN_CLASSES: tuple[str, ...] = (
    "人物类_实体", "人物类_概念", "作品类_实体", "作品类_概念", "组织机构类", "组织机构类_企事业单位",
    "世界地区类", "场所类", "饮食类", "生物类_动物", "医学术语类", "术语类", "物体类", "词汇用语",
)

# What ``ner`` in accurate mode reports as entities by default.
ENTITY_CATEGORIES: tuple[str, ...] = (
    "人物类_实体", "作品类_实体", "组织机构类", "组织机构类_企事业单位", "世界地区类", "场所类", "品牌名", "时间类",
)

# LAC tag -> the category when nothing more specific is known.
LAC_TO_WORDTAG: dict[str, str] = {
    "PER": "人物类_实体", "nr": "人物类_实体",
    "LOC": "世界地区类", "ns": "世界地区类",
    "ORG": "组织机构类", "nt": "组织机构类",
    "nw": "作品类_实体",
    "nz": "术语类",
    "n": "词汇用语",
    "TIME": "时间类", "t": "时间类",
    "f": "位置方位", "s": "位置方位",
    "v": "场景事件", "vd": "场景事件", "vn": "场景事件",
    "a": "修饰词", "ad": "修饰词", "an": "修饰词",
    "d": "副词",
    "m": "数量词", "q": "数量词",
    "r": "代词",
    "p": "介词",
    "c": "连词",
    "u": "助词",
    "xc": "助词",
    "w": "w",
}

# LAC tag -> the categories the tree or the classifier may give such a word
# ("category agreement"): a name tagged ORG never becomes a person.
_ALL_NOUNS = NOUN_CLASSES
CANDIDATES: dict[str, tuple[str, ...]] = {
    "PER": ("人物类_实体",), "nr": ("人物类_实体",),
    "LOC": ("世界地区类", "场所类"), "ns": ("世界地区类", "场所类"),
    "ORG": ("组织机构类", "组织机构类_企事业单位"), "nt": ("组织机构类", "组织机构类_企事业单位"),
    "nw": ("作品类_实体",),
    "nz": _ALL_NOUNS, "n": _ALL_NOUNS,
}

# Closed-class words whose category is not their LAC tag's.
FUNCTION_WORDS: dict[str, str] = {}
for _words, _category in (
    ("不 没 没有 未 无 非 别 勿 莫 不要 不用 甭 未必 并非 不曾 从未 未曾 不必", "否定词"),
    ("是 是的 对的 没错", "肯定词"),
    ("什么 谁 哪 哪里 哪儿 哪个 哪些 怎么 怎样 怎么样 如何 为什么 为何 多少 几时 啥 咋 干嘛", "疑问词"),
    ("吗 呢 吧 啊 呀 嘛 哦 啦 哇 罢了 而已 么 哟 咯 喽 呗 嘞", "语气词"),
    ("唉 哎 哎呀 哎哟 嗯 喂 嘿 咦 哼 呸 噢 嗨 哦哟 天哪 哇塞", "叹词"),
    ("哈哈 呵呵 嘻嘻 嘿嘿 哈哈哈 砰 咚 哗 哗啦 轰 轰隆 叮当 滴答 嘀嗒 喵 汪汪 呜呜 咕咚 扑通 噼里啪啦", "拟声词"),
):
    for _word in _words.split():
        FUNCTION_WORDS[_word] = _category


def top_type(category: str) -> str:
    """The top type a category belongs to (a category taskflow does not know is its own top type)."""
    return TOP_TYPES.get(category, category)


def termid(category: str, term: str) -> str:
    """WordTag's term id form: ``<top type>_eb_<term>``.

    >>> termid("作品类_实体", "红楼梦")
    '作品与出版物_eb_红楼梦'
    """
    return f"{top_type(category)}_eb_{term}"
