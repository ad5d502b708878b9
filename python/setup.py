"""Records, in the installed package only, where this checkout's libneedle.so is (`make
native` builds it there), so `pip install ./python` needs no compiler and finds the library
without NEEDLE_LIB. Metadata is in pyproject.toml."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.path.join(CHECKOUT, "build", "native", "libneedle.so")
        with open(os.path.join(self.build_lib, "needle_trainer", "_checkout.py"), "w") as f:
            f.write(f'"""Written by setup.py at install time."""\nLIBNEEDLE = {lib!r}\n')


setup(cmdclass={"build_py": BuildPy})
