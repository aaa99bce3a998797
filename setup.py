"""Optional C span and step paths (workflow_lib/capture/_spanext.c, _stepext.c), the diagnosis's
C paths (workflow_lib/diagnose/_fastext.c) and the package list; everything else is in pyproject.toml.

The packages: workflow_lib and its subpackages, and `stallcase`, the public API, from
workflow_lib/public (pyproject.toml's package-dir maps it; a packages.find table cannot add a
mapped package, so the list is made here).

The extension is optional: without a C compiler or Python's headers, or on a Python below
its stable ABI (3.11), the build warns and the package installs with the pure-Python span and
step paths (workflow_lib/capture/sources/host.py, step_core.py), which record the same rows,
only slower.
"""

import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Never fail the install over the optional extension."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all, broken toolchain, ...
            self.warn(f"optional C paths not built ({exc}); the pure-Python span and step paths are used")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            self.warn(f"optional {ext.name} not built ({exc}); its pure-Python path is used")


ext = []
if sys.version_info >= (3, 11) and sys.implementation.name == "cpython":
    for name in ("_spanext", "_stepext"):  # the span path; the step path (step_core.py)
        ext.append(Extension(f"workflow_lib.capture.{name}", [f"workflow_lib/capture/{name}.c"],
                             py_limited_api=True, optional=True, extra_compile_args=["-O2"]))
    # The diagnosis's sorted search and gap texts (search.py and columns.py have their own paths).
    ext.append(Extension("workflow_lib.diagnose._fastext", ["workflow_lib/diagnose/_fastext.c"],
                         py_limited_api=True, optional=True, extra_compile_args=["-O2"]))

setup(packages=[*find_packages(include=["workflow_lib", "workflow_lib.*"]), "stallcase"],
      ext_modules=ext, cmdclass={"build_ext": OptionalBuildExt})
