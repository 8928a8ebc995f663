"""pip build hook: configure and build with CMake, then package the result.

The CMake build (python/CMakeLists.txt) produces build/python/boostcomm/
with the pure-Python files and both extension modules; this copies that
directory into the wheel and bundles libboostcomm beside the modules (their
RPATH starts with $ORIGIN). BOOSTCOMM_BUILD_DIR reuses an existing build
directory (default: build/pip); BOOSTCOMM_CMAKE_ARGS adds configure options.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(os.environ.get("BOOSTCOMM_BUILD_DIR", ROOT / "build" / "pip")).resolve()
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={python}", "-DBOOSTCOMM_BUILD_PYTHON=ON"]
        configure += shlex.split(os.environ.get("BOOSTCOMM_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        jobs = os.environ.get("JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build), "-j", jobs, "--target", "boostcomm_python"])
        package = Path(self.get_ext_fullpath(ext.name)).parent  # <build_lib>/boostcomm
        package.mkdir(parents=True, exist_ok=True)
        for item in (build / "python" / "boostcomm").iterdir():
            if item.suffix in (".py", ".so"):
                shutil.copy2(item, package / item.name)
        lib = (build / "libboostcomm.so.0").resolve()
        shutil.copy2(lib, package / "libboostcomm.so.0")


setup(
    packages=["boostcomm", "boostcomm.plot"],  # plot: charts of the tools' JSON (docs/PLOTS.md)
    package_dir={"boostcomm": "python/boostcomm"},
    ext_modules=[Extension("boostcomm._boostcomm", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
