"""Built-in tasks, one sub-package each (imported as ``taskflow.tasks``).

Every sub-package is a task package, found by :mod:`taskflow.registry` and
imported only when one of its names is looked up.  Task packages keep Paddle
out of their import path (a network lives in ``model.py``, imported only
when a model is built), so a look-up stays cheap.
"""
