"""Packs a staged tree into needle's wheel (before `auditwheel repair` makes it manylinux).

usage: pack.py STAGE OUTDIR   (prints the wheel's path)

STAGE holds the packages as they install (needle_rl/ with bin/needle, needle_trainer/ with
libneedle.so). The version is python/pyproject.toml's; the tag is the generic linux_x86_64 that
auditwheel replaces with the manylinux policy the files meet.
"""
import base64
import hashlib
import os
import sys
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "needle_rl"
TAG = "py3-none-linux_x86_64"


def metadata(version):
    return (f"Metadata-Version: 2.1\nName: needle-rl\nVersion: {version}\n"
            "Summary: needle: retrieval server, index builder and trainer kernels for search-augmented RL\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy>=1.22\n")


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(stage, outdir):
    with open(os.path.join(ROOT, "python", "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    info = f"{NAME}-{version}.dist-info"
    extra = {
        f"{info}/METADATA": metadata(version).encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: needle tools/wheel/pack.py\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
        f"{info}/entry_points.txt": b"[console_scripts]\nneedle = needle_rl._launcher:main\n",
    }
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"{NAME}-{version}-{TAG}.whl")
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for dirpath, dirnames, filenames in os.walk(stage):
            dirnames.sort()
            for fn in sorted(filenames):
                full = os.path.join(dirpath, fn)
                name = os.path.relpath(full, stage)
                with open(full, "rb") as f:
                    data = f.read()
                zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                zi.external_attr = (os.stat(full).st_mode & 0o777 | 0o100000) << 16  # keeps bin/needle executable
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
                records.append(record_line(name, data))
        for name, data in extra.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
            records.append(record_line(name, data))
        records.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    print(path)


if __name__ == "__main__":
    main(*sys.argv[1:])
