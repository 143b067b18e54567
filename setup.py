"""Package data that lives at the top of the checkout.

The checkout keeps lab's data where people look for it (``topologies/``, ``scenarios/``,
``kernels/``, ``images/``: see README "Layout"); a wheel carries a copy of each under
``lab/_data/``, which ``lab.paths`` uses when there is no checkout around the package.
The trace parser's fast path is a C extension (lab/trace/_scan.c), built when a C
compiler and Python's headers are there (scripts/setup.sh installs gcc and python3-dev)
and optional otherwise: without it the parser runs its pure-Python path, slower.
Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# The folders lab.paths looks up with _shipped() (not imported: the build must not import lab).
DATA_FOLDERS = ("topologies", "scenarios", "kernels", "images")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders
            return
        for name in DATA_FOLDERS:
            dest = Path(self.build_lib) / "lab" / "_data" / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(HERE / name, dest, ignore=SKIP)


setup(
    cmdclass={"build_py": BuildWithData},
    ext_modules=[Extension("lab.trace._scan", ["lab/trace/_scan.c"], optional=True, extra_compile_args=["-O2"])],
)
