"""One Taskflow instance shared by many threads gives the serial results."""

from concurrent.futures import ThreadPoolExecutor

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
