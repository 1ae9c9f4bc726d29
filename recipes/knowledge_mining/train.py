"""Recipe: term tree + category classifier -> a knowledge_mining model package.

    python -m recipes.knowledge_mining.train --data-dir ../shared/data --out resources/knowledge_mining/termtree

Sources (all MIT or research-use, see ../shared/data/*/README.md):

* THUOCL (``lexicon/thuocl/thuocl_all.tsv``): 11 category lists -> :data:`THUOCL_CATEGORY`;
  place names with a venue suffix (路, 大学, 公园...) -> 场所类.
* CLUENER2020 train (``ner/cluener2020/train.json``): entity mentions -> :data:`CLUENER_CATEGORY`.
* jieba's dictionaries (the installed ``jieba/dict.txt`` and ``lexicon/jieba_dict_small``): proper nouns
  (nr -> 人物类_实体, ns -> 世界地区类 / 场所类, nt -> 组织机构类 / 企事业单位 by suffix) for the tree;
  common nouns (n) for the classifier only, with a weak label from their suffix
  (:data:`NOUN_SUFFIXES`; 词汇用语 when none applies).

Held out: every THUOCL term with ``crc32(term) % 20 == 0`` (5%) is removed from
every source, so neither the tree nor the classifier has seen it; the benchmark
checks their categories (``benchmarks/accuracy_knowledge_mining.py``).

The tree's ``freq`` column ranks a term's categories: CLUENER mentions 10^8 +
their count (hand-annotated in context, so trusted most: 董事长 is a position
before it is THUOCL's law term), THUOCL document frequency as given, jieba
frequencies / 10 (jieba's POS is the noisiest evidence; the task trusts those
lines only for words tagged as names).  Place-list terms with an organisation
suffix (大学, 政府, 委...) are 组织机构类, with a company suffix 组织机构类_企事业单位.
"""

from __future__ import annotations

import json
import random
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from taskflow.package_draft import PackageDraft
from taskflow.recipe_command import recipe_parser
from taskflow.tasks.knowledge_mining.categories import NOUN_CLASSES, termid
from taskflow.tasks.knowledge_mining.classifier import feature_ids
from taskflow.tasks.knowledge_mining.termtree import Term, TermTree
from taskflow.tasks.lexical_analysis.tagger import NORMALIZATION, normalize
from taskflow.training import log

from recipes.lexical_analysis.data import source_label

THUOCL_CATEGORY = {
    "it": "术语类", "finance": "术语类", "law": "术语类", "car": "物体类", "idiom": "词汇用语",
    "place": "世界地区类", "food": "饮食类", "historical_figure": "人物类_实体", "medical": "医学术语类",
    "animal": "生物类_动物", "poem": "文化类",   # verse lines: linked, never merged or used to train
}
CLUENER_CATEGORY = {
    "name": "人物类_实体", "position": "人物类_概念", "book": "作品类_实体", "movie": "作品类_实体",
    "game": "作品类_实体", "company": "组织机构类_企事业单位", "government": "组织机构类",
    "organization": "组织机构类", "scene": "场所类", "address": "世界地区类",
}
VENUE_SUFFIXES = tuple("路 街 巷 道 桥 站 港 场 馆 园 寺 庙 宫 塔 楼 院 厦 村 广场 公园 机场 码头 车站 景区".split())
COMPANY_SUFFIXES = tuple("公司 集团 银行 企业 厂 酒店 商场 超市 宾馆 饭店 报社 电视台 出版社".split())
# Bodies that place lists carry (北京大学, 团市委): organisations, not places.
BODY_SUFFIXES = tuple("大学 学院 中学 小学 学校 医院 研究所 研究院 政府 委员会 委 局 厅 法院 检察院".split())
NOUN_SUFFIXES = [   # weak labels for jieba's common nouns, longest suffix first
    ("人物类_概念", "者 员 师 手 官 匠 士 商 长 家 记者 经理 总裁 主席 总统 教授 博士 老板 主任 书记 部长".split()),
    ("场所类", "馆 场 站 园 厅 室 店 院 寺 庙 宫 塔 桥 港 楼 广场 机场 码头 公园 车站 市场 医院 学校 餐厅".split()),
    ("作品类_概念", "小说 电影 电视剧 歌曲 专辑 杂志 作品 著作 诗集 文集 剧本 漫画 动画 纪录片 节目 书籍 报纸 诗歌 散文 童话".split()),
    ("物体类", "机 器 车 船 舰 仪 灯 箱 柜 桌 椅 床 衣 裤 鞋 帽 笔 纸 杯 瓶 盒 刀 枪 炮 弹 表 设备 电脑 手机".split()),
    ("组织机构类", "局 委 署 办 党 队 中心 协会 委员会 政府 组织 机构 联盟 部门 法院 检察院".split()),
    ("组织机构类_企事业单位", list(COMPANY_SUFFIXES)),
]
CLUENER_WEIGHT = 10 ** 8   # hand-annotated in context: ranks above any THUOCL document frequency (max 1.3e7)
NOT_PERSON = set("国家 大家 人家 自家 厂家 东家 娘家 老家 全家 成长 增长 生长 延长 擅长 专长".split())


def held_out(term: str) -> bool:
    """The fixed 5% of THUOCL terms kept out of the tree and the classifier."""
    return zlib.crc32(normalize(term).encode("utf-8")) % 20 == 0


def noun_label(word: str) -> str:
    best, best_len = "词汇用语", 0
    for category, suffixes in NOUN_SUFFIXES:
        for suffix in suffixes:
            whole = len(word) > len(suffix) or len(suffix) >= 2   # 医院 itself is a place; 机 alone is not a machine
            if word.endswith(suffix) and whole and len(suffix) > best_len:
                if category == "人物类_概念" and word in NOT_PERSON:
                    continue
                best, best_len = category, len(suffix)
    return best


def place_category(term: str) -> str:
    if term.endswith(COMPANY_SUFFIXES):
        return "组织机构类_企事业单位"
    if term.endswith(BODY_SUFFIXES):
        return "组织机构类"
    return "场所类" if term.endswith(VENUE_SUFFIXES) else "世界地区类"


def org_category(term: str) -> str:
    return "组织机构类_企事业单位" if term.endswith(COMPANY_SUFFIXES) else "组织机构类"


def read_thuocl(path: Path) -> list[tuple[str, str, int]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            term, category, freq = (line.rstrip("\n").split("\t") + [""])[:3]
            term = term.strip()
            if not term:
                continue
            mapped = THUOCL_CATEGORY[category]
            if mapped == "世界地区类":
                mapped = place_category(term)
            rows.append((term, mapped, int(freq) if freq.isdigit() else 0, f"thuocl:{category}"))
    return rows


def read_cluener(path: Path) -> Counter:
    counts: Counter = Counter()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            for kind, mentions in record["label"].items():
                for mention, spans in mentions.items():
                    category = CLUENER_CATEGORY[kind]
                    if kind == "address":
                        category = place_category(mention)
                    counts[(mention, category, f"cluener:{kind}")] += len(spans)
    return counts


def read_jieba(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """word -> (freq, jieba POS); a later file does not override an earlier one."""
    words: dict[str, tuple[int, str]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                parts = line.split()
                if path.suffix == ".tsv":
                    if number == 0:
                        continue
                    parts = [parts[0], parts[1], parts[2]] if len(parts) >= 3 else []
                if len(parts) >= 3 and parts[1].isdigit() and parts[0] not in words:
                    words[parts[0]] = (int(parts[1]), parts[2])
    return words


def build_tree(args) -> tuple[TermTree, dict]:
    data = Path(args.data_dir)
    tree = TermTree(normalize=normalize)
    stats: Counter = Counter()
    skipped: Counter = Counter()
    for term, category, freq, source in read_thuocl(data / "lexicon" / "thuocl" / "thuocl_all.tsv"):
        if held_out(term):
            skipped["thuocl held out"] += 1
            continue
        tree.add(Term(term, category, termid(category, term), freq, source))
        stats[source] += 1
    for (mention, category, source), count in read_cluener(data / "ner" / "cluener2020" / "train.json").items():
        if held_out(mention):
            skipped["cluener (a held-out THUOCL term)"] += 1
            continue
        tree.add(Term(mention, category, termid(category, mention), CLUENER_WEIGHT + count, source))
        stats[source] += 1
    jieba = read_jieba(jieba_paths(args))
    for word, (freq, pos) in jieba.items():
        if pos in ("nr", "nrfg", "nrt") and 2 <= len(word) <= 4:
            category = "人物类_实体"
        elif pos == "ns":
            category = place_category(word)
        elif pos == "nt":
            category = org_category(word)
        else:
            continue
        if held_out(word):
            skipped["jieba (a held-out THUOCL term)"] += 1
            continue
        if tree.lookup(word, [category]):
            continue    # keep the curated source's line
        tree.add(Term(word, category, termid(category, word), freq // 10, f"jieba:{pos}"))
        stats[f"jieba:{pos}"] += 1
    return tree, {"added": dict(sorted(stats.items())), "skipped": dict(skipped)}


def jieba_paths(args) -> list[Path]:
    paths = [Path(args.jieba_dict)] if args.jieba_dict else []
    if not paths:
        import jieba

        paths = [Path(jieba.__file__).parent / "dict.txt"]
    return paths + [Path(args.data_dir) / "lexicon" / "jieba_dict_small" / "dict_small.tsv"]


def classifier_data(tree: TermTree, args, rng: random.Random) -> tuple[list[str], list[int]]:
    index = {c: i for i, c in enumerate(NOUN_CLASSES)}
    by_class: dict[str, set[str]] = defaultdict(set)
    for term in tree:
        if term.category in index:
            by_class[term.category].add(normalize(term.term))
    for word, (freq, pos) in read_jieba(jieba_paths(args)).items():
        if pos == "n" and not held_out(word) and word not in tree:
            by_class[noun_label(word)].add(normalize(word))
    words, labels = [], []
    for category in NOUN_CLASSES:
        pool = sorted(by_class[category])
        rng.shuffle(pool)
        pool = pool[: args.max_per_class]
        words += pool
        labels += [index[category]] * len(pool)
        log(f"classifier: {category} {len(pool)} words")
    return words, labels


def train_classifier(words: list[str], labels: list[int], buckets: int, seed: int):
    from scipy import sparse
    from sklearn.linear_model import SGDClassifier

    rows, cols = [], []
    for row, word in enumerate(words):
        ids = feature_ids(word, buckets)
        rows += [row] * len(ids)
        cols += ids.tolist()
    x = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(words), buckets))
    x.sum_duplicates()
    model = SGDClassifier(loss="log_loss", alpha=1e-6, max_iter=30, tol=1e-4, random_state=seed,
                          class_weight="balanced")
    model.fit(x, np.array(labels))
    weights = np.zeros((buckets, len(NOUN_CLASSES)), dtype=np.float32)
    bias = np.zeros(len(NOUN_CLASSES), dtype=np.float32)
    weights[:, model.classes_] = model.coef_.T
    bias[model.classes_] = model.intercept_
    bias[[i for i in range(len(NOUN_CLASSES)) if i not in set(model.classes_)]] = -1e4   # never seen: never chosen
    return weights, bias


def holdout_accuracy(weights, bias, data: Path) -> dict:
    """The classifier alone on the held-out THUOCL terms (categories it knows, verse lines excluded)."""
    from taskflow.tasks.knowledge_mining.classifier import CategoryClassifier

    clf = CategoryClassifier(weights, bias, NOUN_CLASSES)
    right = total = 0
    for term, category, _, _ in read_thuocl(data / "lexicon" / "thuocl" / "thuocl_all.tsv"):
        if held_out(term) and category in NOUN_CLASSES:
            total += 1
            right += clf.predict(normalize(term)) == category
    return {"terms": total, "accuracy": round(right / max(total, 1), 4)}


def main(argv=None) -> int:
    parser = recipe_parser("knowledge_mining", __doc__, name=None, data_required=True, network=False,
                           data="root of the shared data (lexicon/, ner/)")
    parser.prog = "python -m recipes.knowledge_mining.train"
    parser.add_argument("--jieba-dict", default=None, help="jieba dict.txt (default: the installed jieba's)")
    parser.add_argument("--buckets", type=int, default=1 << 16)
    parser.add_argument("--max-per-class", type=int, default=30000)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)     # no Paddle here: nothing else to seed
    started = time.time()

    tree, tree_stats = build_tree(args)
    log(f"term tree: {len(tree)} entries; {tree_stats}")
    words, labels = classifier_data(tree, args, rng)
    log(f"classifier: training on {len(words)} words, {args.buckets} hash buckets")
    weights, bias = train_classifier(words, labels, args.buckets, args.seed)
    check = holdout_accuracy(weights, bias, Path(args.data_dir))
    log(f"classifier alone on held-out THUOCL terms: {check}")

    with PackageDraft(args, "knowledge_mining", started=started) as draft:
        tree.save(draft / "termtree.tsv.gz")
        np.savez_compressed(draft / "classifier.npz", weights=weights.astype(np.float16), bias=bias)
        draft.write({
            "description": "WordTag-style word categories and term linking: the lexical model's words and LAC tags, "
                           "a term tree built from THUOCL, CLUENER2020 train and jieba's dictionaries, and a hashed "
                           "char n-gram category classifier (numpy at inference).",
            "requires": {"lexical": "lexical_analysis/bigru_crf"},
            "normalization": list(NORMALIZATION),   # the term tree's keys: the lexical model's
            "term_tree": "termtree.tsv.gz",
            "classes": list(NOUN_CLASSES),
            "hash_buckets": args.buckets,
            "labeller": {"name_only_sources": ["jieba:"]},
            "training": {
                "sources": {
                    "thuocl": "lexicon/thuocl/thuocl_all.tsv (MIT)",
                    "cluener": "ner/cluener2020/train.json (train split only; dev is the benchmark's)",
                    "jieba": [source_label(p) for p in jieba_paths(args)],
                },
                "held_out": "THUOCL terms with crc32(normalised term) % 20 == 0, removed from every source",
                "tree": {"entries": len(tree), **tree_stats},
                "classifier": {"words": len(words), "per_class": dict(Counter(NOUN_CLASSES[i] for i in labels)),
                               "model": "sklearn SGDClassifier(log_loss, alpha=1e-6, balanced), exported float16",
                               "seed": args.seed, "held_out_thuocl": check},
                "minutes": round((time.time() - started) / 60, 1),
            },
        })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
