"""Everything is in setup.cfg except the package list, which is discovered here.

The repository maps three folders into one import namespace (setup.cfg's
``package_dir``): ``taskflow/`` -> ``taskflow``, ``tasks/`` -> ``taskflow.tasks``,
``resources/`` -> ``taskflow.resources``.  ``find:`` in setup.cfg cannot prefix
what it finds under ``tasks/``, so the list is made here: a new task folder
ships in the wheel without anyone remembering to list it.
"""

from setuptools import find_packages, setup

packages = [
    *("taskflow" + ("." + name if name else "") for name in ["", *find_packages("taskflow")]),
    *("taskflow.tasks" + ("." + name if name else "") for name in ["", *find_packages("tasks")]),
    "taskflow.resources",
]

setup(packages=packages)
