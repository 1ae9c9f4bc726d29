"""Write ``lexicon_check.jsonl``: minimal pairs made only from held-out lexicon words.

    python recipes/text_similarity/dev/make_lexicon_check.py --data-dir ../shared/data/matching \\
        --lexicon ../shared/data/lexicon

Every lexicon (Cilin synonyms, antonyms, negation words, and the small time, place, politeness and
name classes of ``lexicon.py``) is split by the hash of each word (``lexicon.held_out``); the
recipe's ``--lexicon`` pairs use only generator words, this set only pairs with a held-out word.
A word also written by one of ``augment.py``'s hand-written tables (its entity, setting, antonym
and synonym tables, which older recipes draw from) is not used here either, so no word this set
turns on was ever written by a generator.

The texts are questions of **report splits only** (LCQMC test, BQ test, AFQMC dev), never trained
on, shuffled with a fixed seed; kinds the texts rarely allow (swapped roles and directions, a time
word moved, reorderings) are filled from templates below with held-out names, cities and times.
Each candidate was read, and those whose label is wrong or doubtful (a word in a name, another
sense of a polysemous word) are listed in ``REJECTED`` and skipped; what is left is right in
meaning, not always natural.  ``--show N`` prints N candidates per kind beyond those taken, for
that reading.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from recipes.text_similarity import augment  # noqa: E402
from recipes.text_similarity.data import read_pairs  # noqa: E402
from recipes.text_similarity.lexicon import (LEXICON_DIR, PERSON_NAMES, PLACE_CLASSES, TIME_CLASSES,  # noqa: E402
                                             LexiconEdits, held_out)
from taskflow.tasks.text_similarity.features import model_text  # noqa: E402

OUT = Path(__file__).parent / "lexicon_check.jsonl"
SEED = 2026
SOURCES = ("lcqmc/test.tsv", "bq_corpus/test.tsv", "afqmc/dev.tsv")
# pairs per kind: contrasts (label 0), then paraphrases (label 1)
QUOTA = {"antonym": 80, "negation": 40, "time": 30, "place": 40, "number": 45, "role": 45,
         "synonym": 60, "function": 120, "reorder": 100}
LABEL = {k: 0 for k in ("antonym", "negation", "time", "place", "number", "role")}
LABEL.update({k: 1 for k in ("synonym", "function", "reorder")})


def augment_words() -> set[str]:
    """Every word augment.py's hand-written tables may write."""
    words = {w for ws in augment.ENTITY_CLASSES.values() for w in ws}
    words |= {w for ws in augment.SETTING_CLASSES.values() for w in ws}
    words |= {w for ws in augment.SWAP_CLASSES.values() for w in ws}
    words |= {w for pair in augment.ANTONYMS for w in pair}
    words |= {w for group in augment.SYNONYM_GROUPS for w in group}
    words |= set(augment.ONE_WAY_SYNONYMS) | {w for ws in augment.ONE_WAY_SYNONYMS.values() for w in ws}
    return words


def check_edits(lexicon: Path) -> LexiconEdits:
    """The held-out side, without any word augment.py writes (the tables pruned in place)."""
    edits = LexiconEdits(lexicon, side="held_out")
    banned = augment_words()

    def prune(table):
        out = {}
        for word, others in table.items():
            kept = tuple(o for o in others if o not in banned)
            if word not in banned and kept:
                out[word] = kept
        return out

    for name in ("antonyms", "synonyms", "times", "places"):
        edits.__dict__[name] = prune(getattr(edits, name))
    return edits


def _eligible(words) -> list[str]:
    banned = augment_words()
    return [w for w in words if held_out(w) and w not in banned]


NAMES = _eligible(PERSON_NAMES)
CITIES = _eligible(PLACE_CLASSES["city"])
ALL_CITIES = [c for c in PLACE_CLASSES["city"] if c not in augment_words()]
TIMES = _eligible([w for ws in TIME_CLASSES.values() for w in ws])

# Swapped roles and directions (label 0): one of the two is a held-out name or city.
ROLE_FRAMES = ("{A}把钱借给了{B}", "{A}给{B}发了一条消息", "{A}比{B}高多少", "{A}是{B}的老师吗", "{A}昨天打了{B}",
               "{A}欠了{B}三千块", "{A}在等{B}下班", "{A}送给{B}一本书", "{A}把{B}的电话删了", "{A}向{B}道歉了没有",
               "{A}帮{B}交了房租", "{A}怎么联系{B}")
DIRECTION_FRAMES = ("{A}飞{B}的航班几点起飞", "从{A}开车去{B}要多久", "{A}到{B}的火车票怎么买", "{A}寄快递到{B}要几天",
                    "{A}到{B}的大巴在哪坐", "{A}离{B}近还是远")
# Another time (label 0): the held-out time word or the one it replaces.
TIME_FRAMES = ("{T}{C}会下雨吗", "{T}的会议几点开始", "{T}去{C}的机票贵吗", "帮我订{T}的酒店", "{T}要交房租吗",
               "提醒我{T}给妈妈打电话")


def _one_time(a: str, b: str) -> bool:
    from recipes.text_similarity.lexicon import _same_day

    return _same_day(a, b)


# A time word moved before or after the subject (label 1); the pair's texts carry the same request.
REORDER_FRAMES = (("{T}我要去{C}", "我{T}要去{C}"), ("{T}{C}的天气怎么样", "{C}{T}的天气怎么样"),
                  ("{T}我们在{C}见面", "我们{T}在{C}见面"), ("{T}你去{C}吗", "你{T}去{C}吗"),
                  ("{C}{T}会下雪吗", "{T}{C}会下雪吗"), ("{T}他回{C}", "他{T}回{C}"),
                  ("{C}和{D}哪个城市大", "{D}和{C}哪个城市大"), ("{C}和{D}之间有多远", "{D}和{C}之间有多远"),
                  ("{A}和{B}是同学吗", "{B}和{A}是同学吗"), ("{A}跟{B}谁年纪大", "{B}跟{A}谁年纪大"))

# Edits read and refused, as (what text1 says, what text2 says there): another sense of the word
# (支付 / 领取 in 花呗支付, 查询 / 严查), or a word inside a name or a fixed phrase.
REJECTED: set[tuple[str, str]] = {
    # antonyms
    ("一直", "断续"), ("保养", "损伤"), ("保障", "侵犯"), ("出现", "消逝"), ("出现", "隐匿"), ("合并", "分头"), ("启用", "查封"), ("复", "答"),
    ("幸福", "可怜"), ("开始", "不休"), ("强制", "自发"), ("忘记", "记取"), ("抑制", "促成"), ("概括", "具体"), ("欣", "怅"), ("正式", "暂行"),
    ("沉默", "发言"), ("活动", "静止"), ("珍惜", "糟踏"), ("生存", "死亡"), ("离", "复"), ("腐烂", "鲜美"), ("赶紧", "拖延"), ("进行", "终止"),
    ("一般", "特殊"), ("不", "可"), ("不足", "充分"), ("不足", "过剩"), ("修复", "拆除"), ("具体", "大抵"), ("具体", "抽象"), ("分析", "综合"),
    ("嚣张", "谦让"), ("固定", "浮动"), ("学习", "玩耍"), ("工作", "消遣"), ("应该", "可能"), ("开始", "截止"), ("开放", "梗阻"), ("打扰", "配合"),
    ("支付", "领取"), ("支持", "反驳"), ("支持", "抵制"), ("死亡", "出生"), ("活动", "固定"), ("满足", "渴望"), ("繁忙", "闲散"), ("组成", "瓦解"),
    ("综合", "分析"), ("自然", "尴尬"), ("诞生", "活命"), ("超出", "少于"), ("运动", "静止"), ("逼近", "离开"), ("震动", "静止"), ("麻烦", "便利"),
    ("正", "失"), ("真", "失"),
    ("享受", "吃苦"), ("发放", "领取"), ("愿意", "反对"), ("招聘", "雇用"), ("诚恳", "虚浮"), ("进行", "停止"), ("难", "健"), ("领取", "寄存"),
    ("放弃", "采取"),
    ("不配", "和谐"), ("保护", "损伤"), ("出现", "隐没"), ("讲究", "粗陋"), ("失", "取"), ("出现", "湮灭"), ("高", "低"), ("足够", "不足"),
    # synonyms
    ("一", "径"), ("乎", "于"), ("传", "污"), ("入", "着"), ("写", "空"), ("发", "刊"), ("取", "到"), ("取", "定"), ("名", "马"),
    ("在", "介"), ("培养", "养殖"), ("存", "归"), ("应", "响"), ("应", "射"), ("应", "馈"), ("得", "行"), ("打", "堕"), ("投", "斥"),
    ("持", "撑"), ("描", "视"), ("撤", "退"), ("放", "给"), ("整", "动"), ("来", "床"), ("来", "身"), ("查询", "严查"), ("武", "短"),
    ("深", "低"), ("狙", "截"), ("确", "承"), ("空", "充"), ("空", "写"), ("章", "禁"), ("考试", "试验"), ("行", "作"), ("行", "可"),
    ("行", "展"), ("行", "得"), ("要", "务"), ("解开", "肢解"), ("训", "教"), ("试", "查"), ("退", "折"), ("退", "撤"), ("退", "转"),
    ("领", "提"), ("具", "示"), ("助", "救"), ("名", "头"), ("差", "勤"), ("承认", "认账"), ("注", "出"), ("示", "具"), ("讪", "腔"),
    ("讲", "考"), ("逃", "流"), ("逃亡", "亡命"), ("配", "发"), ("能", "可"), ("抬", "仰"),
    ("下", "在"), ("为难", "难堪"), ("交", "送"), ("养殖", "放养"), ("出殡", "殡葬"), ("反", "感"), ("反", "批"), ("告", "拜"),
    ("告", "示"), ("命", "生"), ("学", "课"), ("得来", "应得"), ("心", "烦"), ("恋爱", "热恋"), ("改", "易"), ("改", "更"),
    ("求全", "苛求"), ("滞后", "后进"), ("炸", "裂"), ("爆", "突"), ("痒", "瘙"), ("称", "命"), ("红", "配"), ("至", "而"), ("行", "别"),
    ("话", "禀"),
    ("没收", "抄没"), ("回头", "回首"), ("献", "捐"), ("断裂", "折断"), ("无妨", "不妨"), ("是", "能"),
}
# At most this many pairs of one kind make the same edit (请问 / 试问 would fill the synonyms).
PER_EDIT = {"negation": 10, "time": 3, "place": 3}    # other kinds: 2


def edit_of(a: str, b: str) -> tuple[str, str]:
    """What differs between two texts: the spans left after their common head and tail."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return a[head:len(a) - tail], b[head:len(b) - tail]


def source_texts(data_dir: Path) -> list[str]:
    texts = []
    for relative in SOURCES:
        for pair in read_pairs(data_dir / relative):
            texts += [pair.text1.strip(), pair.text2.strip()]
    texts = [t for t in dict.fromkeys(texts) if 4 <= len(t) <= 30]
    random.Random(SEED).shuffle(texts)
    return texts


def templated(kind: str, rng: random.Random) -> list[tuple[str, str]]:
    out = []
    if kind == "role":
        for frame in ROLE_FRAMES:
            for a in NAMES:
                b = rng.choice([n for n in PERSON_NAMES if n != a])
                out.append((frame.format(A=a, B=b), frame.format(A=b, B=a)))
        for frame in DIRECTION_FRAMES:
            for a in CITIES:
                b = rng.choice([c for c in ALL_CITIES if c != a])
                out.append((frame.format(A=a, B=b), frame.format(A=b, B=a)))
    elif kind == "time":
        for frame in TIME_FRAMES:
            for t in TIMES:
                same_class = next(ws for ws in TIME_CLASSES.values() if t in ws)
                other = rng.choice([w for w in same_class if w != t and not _one_time(w, t)])
                city = rng.choice(ALL_CITIES)
                out.append((frame.format(T=t, C=city), frame.format(T=other, C=city)))
    elif kind == "reorder":
        for first, second in REORDER_FRAMES:
            for _ in range(16):
                t, c = rng.choice(TIMES), rng.choice(CITIES)
                d = rng.choice([x for x in ALL_CITIES if x != c])
                a = rng.choice(NAMES)
                b = rng.choice([n for n in PERSON_NAMES if n != a])
                out.append((first.format(T=t, C=c, D=d, A=a, B=b), second.format(T=t, C=c, D=d, A=a, B=b)))
    rng.shuffle(out)
    return out


def build(data_dir: Path, lexicon: Path, show: int = 0) -> list[dict]:
    edits = check_edits(lexicon)
    texts = source_texts(data_dir)
    generators = {"antonym": edits.antonym, "negation": edits.negation, "time": edits.time, "place": edits.place,
                  "synonym": edits.synonym, "function": edits.function, "reorder": edits.reorder,
                  "number": augment.change_number}
    rows, seen = [], set()
    for kind, quota in QUOTA.items():
        rng = random.Random(f"{SEED}-{kind}")
        candidates = []
        if kind in generators:
            for text in texts:
                pair = generators[kind](text, rng)
                if pair is not None:
                    candidates.append((pair.text1, pair.text2))
                if len(candidates) >= 20 * (quota + show):
                    break
        if kind in ("role", "reorder", "time"):
            candidates += templated(kind, rng)
        taken, shown, edits_made = 0, 0, {}
        for a, b in candidates:
            key = tuple(sorted((model_text(a), model_text(b))))
            edit = edit_of(a, b)
            if edit in REJECTED or edit[::-1] in REJECTED or key in seen or key[0] == key[1] \
                    or (kind not in ("role", "reorder", "function", "number")
                        and edits_made.get(frozenset(edit), 0) >= PER_EDIT.get(kind, 2)):
                continue
            edits_made[frozenset(edit)] = edits_made.get(frozenset(edit), 0) + 1
            if taken < quota:
                seen.add(key)
                rows.append({"text1": a, "text2": b, "label": LABEL[kind], "kind": kind})
                taken += 1
            elif shown < show:
                print(f"EXTRA {kind}\t{a}\t{b}\t{edit[0]}/{edit[1]}")
                shown += 1
        if taken < quota:
            print(f"{kind}: {taken} of {quota} pairs", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "matching")
    parser.add_argument("--lexicon", type=Path, default=LEXICON_DIR)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--show", type=int, default=0, help="print this many further candidates per kind")
    parser.add_argument("--print", action="store_true", help="print every pair taken")
    args = parser.parse_args(argv)
    rows = build(args.data_dir, args.lexicon, args.show)
    if args.print:
        for r in rows:
            print(f"{r['kind']}\t{r['text1']}\t{r['text2']}\t{'/'.join(edit_of(r['text1'], r['text2']))}")
    with open(args.out, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    by_kind = {k: sum(r["kind"] == k for r in rows) for k in QUOTA}
    print(f"wrote {args.out}: {len(rows)} pairs, {sum(r['label'] == 0 for r in rows)} contrasts; {by_kind}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
