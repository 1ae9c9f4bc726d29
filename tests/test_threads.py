"""One Taskflow instance shared by many threads gives the serial results."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from taskflow import Taskflow

TEXTS = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "一般般吧", "非常满意！" * 20, "差"]


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_8_threads_x_200_calls_equal_serial_results(tiny_sentiment, static):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, static=static)
    calls = [[TEXTS[i % len(TEXTS)], TEXTS[(i * 3) % len(TEXTS)]] for i in range(8 * 200)]
    serial = {i: flow(c) for i, c in enumerate(calls[:len(TEXTS) * 3])}
    expected = {tuple(c): r for c, r in zip(calls, serial.values())}

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(flow, calls))
    assert len(results) == len(calls)
    for call, result in zip(calls, results):
        assert result == expected[tuple(call)]


# Run in a fresh interpreter, so that no task package is imported yet.  The loader below only
# lengthens the moment when Python's import machinery holds the lock of the lexical_analysis
# package (for one of the package's own tasks) but has not yet put it in sys.modules.  The
# threads building knowledge_mining and ner, whose ``from taskflow.tasks.lexical_analysis.tagger
# import ...`` locks the submodule before the package, wait for that moment, so they arrive in it
# every time, where on their own they do now and then.
_BUILD_AT_ONCE = r"""
import importlib.machinery, json, sys, threading, time, traceback

INSIDE = ("lexical_analysis", "pos_tagging", "word_segmentation")   # tasks of the package itself
creating = threading.Event()

class SlowToCreate:
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        creating.set()
        time.sleep(1.0)
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)

class SlowLexicalPackage:
    def find_spec(self, name, path=None, target=None):
        if name != "taskflow.tasks.lexical_analysis" or threading.current_thread().name not in INSIDE:
            return None          # the ordinary finders find it
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        spec.loader = SlowToCreate(spec.loader)
        return spec

sys.meta_path.insert(0, SlowLexicalPackage())
from taskflow import Taskflow

packages = json.loads(sys.argv[1])
barrier = threading.Barrier(len(packages))
errors = []

def build(task, path):
    barrier.wait()
    if task in ("knowledge_mining", "ner"):
        creating.wait(30)    # they come in while lexical_analysis is being imported, never before
    try:
        Taskflow(task, task_path=path)
    except BaseException:
        errors.append(traceback.format_exc())

threads = [threading.Thread(target=build, args=item, name=item[0]) for item in packages.items()]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("\n".join(errors) or "built")
"""


@pytest.mark.timeout(180)
def test_every_task_built_from_its_own_thread_at_once_in_a_fresh_process(tiny_models):
    import json
    import subprocess
    import sys
    from pathlib import Path

    # ner and knowledge_mining import lexical_analysis' tagger from outside its package, the
    # lexical tasks from inside it: the two orders a thread each, with every other task beside them.
    order = ["knowledge_mining", "lexical_analysis", "ner", "pos_tagging", "word_segmentation",
             "reading_comprehension", "sentiment_analysis", "text_similarity", "text_classification"]
    packages = {task: str(tiny_models[task]) for task in order}
    run = subprocess.run([sys.executable, "-c", _BUILD_AT_ONCE, json.dumps(packages)], capture_output=True,
                         text=True, timeout=150, cwd=Path(__file__).parent.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "built", run.stdout[-3000:]


# ------------------------------------------------------------------ the bundled defaults under threads

REVIEWS = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "一般般吧", "房间不大，但是很温馨", "不是不好吃，就是太贵了",
           "快递很快，包装完好，五星好评", "手机用了三天就坏了，客服也不理人", "电影太感人了，哭得稀里哗啦的，强烈推荐大家去看"]
POSTS = ["今天天气真好，和朋友出去玩了一整天，开心！", "哈哈哈笑死我了，这也太可爱了吧[哈哈]", "又加班到十点，累成狗了 #打工人#",
         "转发微博 //@小明: 支持一下", "好想放假啊，不想上班", "新年快乐！祝大家万事如意"]
# Longer than the model's 256-char chunks: split, each chunk routed on its own.
LONG_REVIEWS = ["房间很大，早餐好吃。" * 30, "服务态度很差。" * 20 + "不过菜还可以。" * 20]
SENTIMENT_TEXTS = REVIEWS + POSTS + LONG_REVIEWS


def _calls(items: list, threads: int, rounds: int) -> list[list[list]]:
    """Per thread, ``rounds`` calls of 1 to 4 items each, each thread starting at other items."""
    n = len(items)
    return [[[items[(t * 5 + r * 3 + k) % n] for k in range(1 + (t + r) % 4)] for r in range(rounds)]
            for t in range(threads)]


def _in_threads(call, per_thread: list[list[list]]) -> list[list]:
    """Each thread makes its own calls, one after another, all threads at once."""
    barrier = threading.Barrier(len(per_thread))

    def work(calls):
        barrier.wait()
        return [call(items) for items in calls]

    with ThreadPoolExecutor(max_workers=len(per_thread)) as pool:
        return list(pool.map(work, per_thread))


def _recording_routes(task) -> tuple[list[tuple[str, int]], Counter]:
    """From now on, for every chunk a call runs: its text and the route the router chose for it (as
    the task's plan hands them to preprocess), and which networks read it (a review's cascade lets
    the first network settle what it is sure of): a count of (text, network index)."""
    routes, reads, lock = [], Counter(), threading.Lock()
    preprocess = task.preprocess

    def recorded_preprocess(units, keys=None):
        with lock:
            routes.extend(zip([text for _, text in units], keys))
        return preprocess(units, keys)

    def recording(k, feeds):
        def recorded_feeds(texts):
            with lock:
                reads.update((text, k) for text in texts)
            return feeds(texts)
        return recorded_feeds

    task.preprocess = recorded_preprocess
    for k, network in enumerate(task.networks):
        network.feeds = recording(k, network.feeds)
    return routes, reads


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["fast", "accurate"])
def test_the_default_sentiment_routes_and_scores_each_thread_as_alone(mode):
    """The bundled model (fast: a router, the reviews and the posts networks; accurate: the same
    router, and for reviews a cascade to the encoder mix) from 8 threads with texts of their own:
    each text's scores are those it gets alone, each chunk goes the route it goes alone and is read
    by the networks that read it alone.  In fp32: in bf16 (the default's encoder on some CPUs) a
    row's last digits depend on how many rows its batch has."""
    flow = Taskflow("sentiment_analysis", mode=mode, offline=True, return_all_scores=True, num_threads=1,
                    precision="fp32")
    routes, reads = _recording_routes(flow.task)
    alone = {text: flow([text])[0] for text in SENTIMENT_TEXTS}
    serial = dict(routes)
    assert len(serial) == len(routes), "every chunk is run once alone"
    readers = {text: frozenset(k for (t, k) in reads if t == text) for text in serial}
    assert set(serial.values()) == {0, 1}, "the texts take both routes"
    if mode == "fast":            # reviews to the package's own network, posts to the posts network
        assert all(readers[text] == {route} for text, route in serial.items()), readers
    else:                         # some reviews settled by their first network, some read by the encoder mix
        assert {len(readers[text]) for text, route in serial.items() if route == 0} == {1, 4}, readers
    routes.clear()
    reads.clear()

    per_thread = _calls(SENTIMENT_TEXTS, threads=8, rounds=6)
    answers = _in_threads(flow, per_thread)
    for calls, results in zip(per_thread, answers):
        for texts, got in zip(calls, results):
            assert [r["text"] for r in got] == texts
            for r in got:
                expected = alone[r["text"]]
                assert r["label"] == expected["label"], r["text"]
                assert r["scores"] == pytest.approx(expected["scores"], abs=1e-6), r["text"]
                assert r["score"] == pytest.approx(expected["score"], abs=1e-6)
    runs = Counter(text for text, _ in routes)
    assert sum(runs.values()) > sum(len(texts) for calls in per_thread for texts in calls)    # long texts: chunks
    for text, route in routes:
        assert route == serial[text], text
    assert reads == Counter({(text, k): runs[text] for text in runs for k in readers[text]})


CONTEXTS = {
    "hangzhou": "杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面，是著名的旅游景点。",
    "honglou": "曹雪芹是清代作家，他写了红楼梦。红楼梦是中国古典四大名著之一，书中写了贾宝玉和林黛玉的故事。",
    "peking": "北京大学创办于一八九八年，初名京师大学堂，是中国近代第一所国立综合性大学。",
    # 540 chars: two 512-char windows, each read by the encoder in pieces of its own
    "rivers": "长江是中国第一长河，全长约六千三百公里，流经青海、西藏、四川、云南、重庆、湖北、湖南、江西、安徽、江苏和上海。" * 6
              + "三峡大坝位于湖北省宜昌市，是世界上规模最大的水电站。" + "黄河是中国第二长河，发源于青海省巴颜喀拉山脉。" * 8,
}
QUESTIONS = [("hangzhou", "浙江省的省会是哪里？"), ("hangzhou", "西湖在哪里？"), ("honglou", "红楼梦是谁写的？"),
             ("honglou", "曹雪芹是哪个朝代的作家？"), ("peking", "北京大学创办于哪一年？"), ("peking", "北京大学最初叫什么名字？"),
             ("rivers", "三峡大坝位于哪里？"), ("rivers", "黄河发源于哪里？"), ("rivers", "长江全长多少公里？")]
QA_ITEMS = [{"context": CONTEXTS[name], "question": question} for name, question in QUESTIONS]


def _recording_focus(task) -> list[tuple[tuple, tuple, int]]:
    """From now on, each time the focused encoder picks what to read of a window: the window
    (question and context ids, start, end), the pieces it reads, and how many pieces it has."""
    reader = task.readers[task._focused()]
    seen, lock = [], threading.Lock()
    focus = reader.focus

    def recorded(prepared, start, end, spans):
        pieces = focus(prepared, start, end, spans)
        with lock:
            seen.append(((prepared.question_ids.tobytes(), prepared.context_ids.tobytes(), start, end),
                         tuple(pieces), len(reader.pieces(prepared, start, end))))
        return pieces

    reader.focus = recorded
    return seen


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["fast", "accurate"])
def test_the_default_reading_comprehension_answers_each_thread_as_alone(mode):
    """The bundled readers (fast: drqa_char voting with drqa_word; accurate: both with the encoder,
    which reads only the pieces holding their best spans) from 6 threads (the encoder's mode: 4) with
    questions of their own, the fast mode's calls with top_k=1 or 2: each answer is the one the item
    gets alone, and the encoder reads, of each window, the pieces it reads alone."""
    qa = Taskflow("reading_comprehension", mode=mode, offline=True, num_threads=1)
    focused = mode == "accurate"
    if focused:
        assert qa.task.encoder_focus == qa.task.manifest["encoder_focus"] == 5
        seen = _recording_focus(qa.task)
    top_ks = (1, 2) if not focused else (1,)
    alone = {(k, i): qa(item, top_k=k)[0] for k in top_ks for i, item in enumerate(QA_ITEMS)}
    if focused:
        serial = {key: pieces for key, pieces, _ in seen}
        assert all(serial[key] == pieces for key, pieces, _ in seen)     # every window: one choice of pieces
        assert any(len(pieces) < total for _, pieces, total in seen), "the focus skips pieces of some window"
        seen.clear()

    indexes = list(range(len(QA_ITEMS)))
    per_thread = _calls(indexes, threads=4, rounds=2) if focused else _calls(indexes, threads=6, rounds=4)
    per_thread = [[(calls, top_ks[(t + r) % len(top_ks)]) for r, calls in enumerate(thread)]
                  for t, thread in enumerate(per_thread)]
    answers = _in_threads(lambda call: qa([QA_ITEMS[i] for i in call[0]], top_k=call[1]), per_thread)
    for calls, results in zip(per_thread, answers):
        for (items, k), got in zip(calls, results):
            assert len(got) == len(items)
            for i, answer in zip(items, got):
                expected = alone[(k, i)]
                if k == 1:
                    answer, expected = [answer], [expected]
                assert [(a["answer"], a["start"], a["end"]) for a in answer] == \
                       [(a["answer"], a["start"], a["end"]) for a in expected], QA_ITEMS[i]["question"]
                assert [a["score"] for a in answer] == pytest.approx([a["score"] for a in expected], abs=1e-6)
    if focused:
        assert len(seen) >= sum(len(items) for calls in per_thread for items, _ in calls)
        for key, pieces, _ in seen:
            assert pieces == serial[key]
