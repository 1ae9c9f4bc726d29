"""knowledge_mining: category accuracy, term linking and speed, beside the plain LAC-tag mapping.

    flock /work/scratch/cpu.lock env OMP_NUM_THREADS=2 python benchmarks/accuracy_knowledge_mining.py --data ../shared/data

Evaluation sets (none of them feeds the tree or the classifier):

* THUOCL held-out terms: the fixed 5% (``crc32(term) % 20 == 0``) the recipe removes from every
  source; each term alone is one text; expected category from its THUOCL list (verse lines skipped).
* CLUENER2020 dev (the recipe reads only train): every gold mention in its sentence, the fine
  class mapped to WordTag (:data:`CLUENER_EXPECTED`).
* MSRA NER test (4,365 sentences): PER / LOC / ORG mentions.

Title marks 《》 at a mention's edges are dropped (CLUENER includes them now and then).
A mention is *exact* when one item has its span and an accepted category, and *head-right*
when the last item overlapping it (Chinese compounds are head-final) has an accepted category,
whatever the boundaries.  A *link* is right when the item spans the mention exactly and the
termid's top type is the expected category's.  The baseline is the same lexical model's words
with each LAC tag mapped to one category (``Labeller(None, None, rules=False)``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): held-out terms, readers
from common import load_note, machine, quiet_load, table, update_section  # noqa: E402

THREADS = 2
ACCEPT = {   # expected category -> categories accepted for it
    "世界地区类": {"世界地区类", "场所类"}, "场所类": {"场所类", "世界地区类"},
    "医学术语类": {"医学术语类", "药物类", "疾病损伤类"}, "生物类_动物": {"生物类_动物", "生物类"},
    "饮食类": {"饮食类", "饮食类_菜品"}, "物体类": {"物体类", "品牌名", "物体类_兵器"},
}
CLUENER_EXPECTED = {
    "name": {"人物类_实体"}, "position": {"人物类_概念"}, "book": {"作品类_实体"}, "movie": {"作品类_实体"},
    "game": {"作品类_实体"}, "company": {"组织机构类_企事业单位"}, "government": {"组织机构类"},
    "organization": {"组织机构类", "组织机构类_企事业单位"}, "scene": {"场所类", "世界地区类"},
    "address": {"世界地区类", "场所类"},
}
MSRA_EXPECTED = {"PER": {"人物类_实体"}, "LOC": {"世界地区类", "场所类"}, "ORG": {"组织机构类", "组织机构类_企事业单位"}}


def thuocl_heldout(data: Path):
    from recipes.knowledge_mining.train import held_out, read_thuocl

    seen, rows = set(), []
    for term, category, _, source in read_thuocl(data / "lexicon" / "thuocl" / "thuocl_all.tsv"):
        if held_out(term) and source != "thuocl:poem" and term not in seen:
            seen.add(term)
            rows.append((term, source.split(":")[1], ACCEPT.get(category, {category})))
    return rows


def cluener_dev(data: Path):
    sentences = []
    with open(data / "ner" / "cluener2020" / "dev.json", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            mentions = [(s, e + 1, kind, CLUENER_EXPECTED[kind]) for kind, found in record["label"].items()
                        for spans in found.values() for s, e in spans]
            sentences.append((record["text"], mentions))
    return sentences


def msra_test(data: Path):
    from recipes.lexical_analysis.data import read_bio_file

    return [(text, [(s, e, kind, MSRA_EXPECTED[kind]) for s, e, kind in spans])
            for text, spans in read_bio_file(data / "ner" / "msra" / "test.txt")]


def words_from(result) -> list[tuple[int, int, str]]:
    out, start = [], 0
    for seg, tag in zip(result["segs"], result["tags"]):
        out.append((start, start + len(seg), tag))
        start += len(seg)
    return out


def score(sentences, items_per_sentence, tree=None):
    """Per-kind and overall counts of exact / head-right / linked mentions."""
    from taskflow.tasks.knowledge_mining.categories import top_type

    counts: dict = defaultdict(Counter)
    for (text, mentions), items in zip(sentences, items_per_sentence):
        by_span = {(s, e): (c, t) for s, e, c, t in items}
        for s, e, kind, accepted in mentions:
            while e - s > 1 and text[s] == "《":   # CLUENER sometimes includes the title marks
                s += 1
            while e - s > 1 and text[e - 1] == "》":
                e -= 1
            c = counts[kind]
            c["mentions"] += 1
            found = by_span.get((s, e))
            c["exact"] += bool(found and found[0] in accepted)
            overlapping = [it for it in items if it[0] < e and it[1] > s and it[2] != "w"]
            c["head"] += bool(overlapping and overlapping[-1][2] in accepted)
            if found and found[1]:
                c["linked"] += 1
                c["link_right"] += found[1].split("_eb_")[0] in {top_type(a) for a in accepted}
            if tree is not None:
                in_tree = text[s:e] in tree
                c["in_tree"] += in_tree
                c["head_in_tree"] += in_tree and bool(overlapping and overlapping[-1][2] in accepted)
    total = Counter()
    for c in counts.values():
        total.update(c)
    counts["all"] = total
    return counts


def pct(a, b) -> str:
    return f"{100 * a / b:.1f}" if b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sample-out", default=None, help="write 50 random CLUENER-dev items here for hand checking")
    parser.add_argument("--limit", type=int, default=None, help="smoke test: first N of each set, RESULTS.md untouched")
    args = parser.parse_args()
    data = Path(args.data)

    from taskflow import Taskflow
    from taskflow.tasks.knowledge_mining import Labeller

    load = quiet_load()
    km = Taskflow("knowledge_mining", batch_size=64, num_threads=THREADS)
    lac = Taskflow("lexical_analysis", batch_size=64, num_threads=THREADS)
    ours, baseline = km.task.labeller, Labeller(None, None, rules=False)
    tree = ours.tree

    lines = [f"Machine: {machine()}; {load_note(load)}. Model: the shipped "
             f"`knowledge_mining/{km.task.manifest.name}` {km.task.manifest.version} (term tree of "
             f"{len(tree):,} entries) over `lexical_analysis/bigru_crf`. Command: `OMP_NUM_THREADS=2 python "
             "benchmarks/accuracy_knowledge_mining.py --data ../shared/data`. Procedure in the script's docstring.", ""]

    # -------------------------------------------------- THUOCL held-out terms, each alone
    from taskflow.tasks.lexical_analysis import normalize

    terms = thuocl_heldout(data)[: args.limit]
    lexed = lac([t for t, _, _ in terms])
    per_kind: dict = defaultdict(Counter)
    for (term, kind, accepted), result in zip(terms, lexed):
        words = words_from(result)
        for name, labeller in (("ours", ours), ("base", baseline)):
            items = [it for it in labeller.label(term, words) if it[2] != "w"]
            per_kind[kind][f"{name}_whole"] += len(items) == 1 and items[0][2] in accepted
            per_kind[kind][f"{name}_head"] += bool(items) and items[-1][2] in accepted
        per_kind[kind]["clf"] += ours.classifier.predict(normalize(term)) in accepted
        per_kind[kind]["n"] += 1
    rows, total = [], Counter()
    for kind, c in sorted(per_kind.items()):
        total.update(c)
        rows.append([kind, c["n"], pct(c["base_head"], c["n"]), pct(c["ours_head"], c["n"]), pct(c["ours_whole"], c["n"]),
                     pct(c["clf"], c["n"])])
    rows.append(["**all**", total["n"], pct(total["base_head"], total["n"]), pct(total["ours_head"], total["n"]),
                 pct(total["ours_whole"], total["n"]), pct(total["clf"], total["n"])])
    lines += [f"### THUOCL held-out terms ({total['n']:,} terms, each one text; none is in the tree)", "",
              "Category of the term's last item (head) — baseline (LAC mapping) vs ours — and ours with the term "
              "as exactly one item (whole); last column: the category classifier alone on the whole term (what "
              "an unknown term gets when the segmenter keeps it in one piece). Rare terms alone are mostly split "
              "by the segmenter into pieces, which is what the pipeline columns pay for. THUOCL's lists are noisy "
              "(发展 is a finance term, 马思聪 a place), which caps every column.", "",
              table(["THUOCL list", "terms", "baseline head %", "ours head %", "ours whole %", "classifier alone %"],
                    rows), ""]

    # -------------------------------------------------- entity mentions in sentences
    for title, sentences in (("CLUENER2020 dev", cluener_dev(data)[: args.limit]),
                             ("MSRA NER test", msra_test(data)[: args.limit])):
        results = lac([t for t, _ in sentences])
        ours_items = [ours.label(t, words_from(r)) for (t, _), r in zip(sentences, results)]
        base_items = [baseline.label(t, words_from(r)) for (t, _), r in zip(sentences, results)]
        a, b = score(sentences, ours_items, tree), score(sentences, base_items)
        rows = []
        for kind in sorted(k for k in a if k != "all") + ["all"]:
            x, y = a[kind], b[kind]
            rows.append([f"**{kind}**" if kind == "all" else kind, x["mentions"], pct(y["exact"], y["mentions"]),
                         pct(x["exact"], x["mentions"]), pct(y["head"], y["mentions"]), pct(x["head"], x["mentions"]),
                         pct(x["linked"], x["mentions"]), pct(x["link_right"], x["linked"])])
        x = a["all"]
        lines += [f"### {title} ({len(sentences):,} sentences, {x['mentions']:,} mentions)", "",
                  table(["gold class", "mentions", "baseline exact %", "ours exact %", "baseline head %",
                         "ours head %", "linked %", "link precision %"], rows), "",
                  f"Mentions whose text is in the tree: {pct(x['in_tree'], x['mentions'])}%; head accuracy on those "
                  f"{pct(x['head_in_tree'], x['in_tree'])}%, on the others "
                  f"{pct(x['head'] - x['head_in_tree'], x['mentions'] - x['in_tree'])}%.", ""]
        if title.startswith("CLUENER") and args.sample_out:
            rng = random.Random(7)
            pool = [(t, it) for (t, _), items in zip(sentences, ours_items) for it in items if it[2] != "w"]
            with open(args.sample_out, "w", encoding="utf-8") as handle:
                for text, (s, e, c, termid) in rng.sample(pool, 50):
                    handle.write(f"{text[s:e]}\t{c}\t{termid or ''}\t{text[max(0, s - 8):s]}[{text[s:e]}]{text[e:e + 8]}\n")

    # -------------------------------------------------- the task end to end equals lexical + labeller
    texts = [t for t, _ in cluener_dev(data)][:200]
    direct = [ours.label(t, words_from(r)) for t, r in zip(texts, lac(texts))]
    via_task = [[[i["offset"], i["offset"] + i["length"], i["wordtag_label"], i.get("termid")] for i in r["items"]]
                for r in km(texts)]
    assert direct == via_task, "the task must equal lexical model + labeller"

    # -------------------------------------------------- speed, same texts, same run
    from bench_lexical import median_speeds

    texts = [t for t, _ in msra_test(data)][: args.limit]
    engines = {"lexical_analysis": lac, "knowledge_mining": km,
               "ner (mode accurate)": Taskflow("ner", mode="accurate", batch_size=64, num_threads=THREADS)}
    speeds, _ = median_speeds(engines, texts, args.seconds, args.rounds, chunk=len(texts))
    n_chars = sum(map(len, texts))
    lines += [f"### Speed ({len(texts):,} MSRA test sentences, {n_chars:,} chars; batch 64, {THREADS} threads, "
              f"static graph; median of {args.rounds} interleaved rounds of >= {args.seconds:.0f} s)", "",
              table(["task", "chars/s"], [[n, f"{m:,.0f} ({lo:,.0f}-{hi:,.0f})"] for n, (m, lo, hi) in speeds.items()]),
              "", f"knowledge_mining / lexical_analysis: "
              f"{speeds['knowledge_mining'][0] / speeds['lexical_analysis'][0]:.2f}x (the labeller is pure Python "
              "over the same model's output).", ""]

    body = "## knowledge_mining: categories, linking and speed\n\n" + "\n".join(lines)
    if args.limit is None:
        update_section("knowledge_mining", body)
    print(body)


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"took {time.time() - started:.0f} s", file=sys.stderr)
