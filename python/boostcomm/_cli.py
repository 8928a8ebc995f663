"""The `boostcomm` command of a pip-installed boostcomm: runs the compiled CLI
that the wheel carries inside the package (boostcomm/bin/boostcomm, which
finds libboostcomm in boostcomm/lib through its RPATH)."""
import os
import sys


def path():
    """The compiled CLI's path inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "boostcomm")


def main():
    exe = path()
    if not os.access(exe, os.X_OK):
        sys.exit(f"boostcomm: the compiled command is missing at {exe} (this package was not installed by "
                 f"`pip install .`; in a source tree it is build/tools/boostcomm)")
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
