"""A PEP 517 build backend for this pure-Python package, in the tree, so
that `pip install bindings/python` needs nothing from PyPI (no setuptools
download in pip's isolated build environment). It builds the one wheel the
package needs: the engram/ modules and their dist-info."""
import base64
import hashlib
import os
import zipfile

NAME = "engram"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: engram experience replay through shared memory: Python binding (ctypes over libengram)
Requires-Python: >=3.9
Requires-Dist: numpy
"""
WHEEL = """Wheel-Version: 1.0
Generator: engram-backend
Root-Is-Purelib: true
Tag: py3-none-any
"""


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    files = []
    pkg = os.path.join(HERE, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                files.append((f"{NAME}/{fn}", f.read()))
    files.append((f"{info}/METADATA", METADATA.encode()))
    files.append((f"{info}/WHEEL", WHEEL.encode()))
    record = [_record_line(p, d) for p, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            z.writestr(p, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("engram's Python binding is installed from the tree: pip install bindings/python")
