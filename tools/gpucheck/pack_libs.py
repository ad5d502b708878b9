"""Packs the shared libraries the GPU check's binaries link, for `make gpucheck`.

    python3 tools/gpucheck/pack_libs.py OUTDIR BINARY...

For every library ldd resolves for the binaries (glibc's own libraries excepted: those cannot
travel), writes OUTDIR/lib/<soname>.xz and records in OUTDIR/libs.json which symbol versions
(readelf -V: GLIBC_2.34, GLIBCXX_3.4.30, ...) the binaries and each packed library need from
each library. On the GPU machine gpucheck.py uses a packed library only where the machine's own
lacks one of those versions: a newer machine keeps its own libstdc++ (which every other library
there expects), an older one gets ours, and a glibc older than the binaries need is reported.
"""
import json
import lzma
import os
import re
import subprocess
import sys

# glibc's libraries: they come with the machine's loader and cannot be replaced by copies.
GLIBC = re.compile(r"^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux[-\w]*)\.so")


def resolved_libs(binaries):
    """{soname: path} of the non-glibc libraries ldd finds for the binaries."""
    out = {}
    for b in binaries:
        text = subprocess.run(["ldd", b], capture_output=True, text=True, check=True).stdout
        for m in re.finditer(r"^\s*(\S+) => (/\S+)", text, re.M):
            if not GLIBC.match(m.group(1)):
                out[m.group(1)] = m.group(2)
    return out


def version_needs(path):
    """{soname: [version names]} a binary or library needs (readelf's version needs section)."""
    text = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True, check=True).stdout
    needs, current = {}, None
    for line in text.splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = needs.setdefault(m.group(1), [])
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current is not None:
            current.append(m.group(1))
    return {k: sorted(set(v)) for k, v in needs.items()}


def merge(into, needs):
    for soname, versions in needs.items():
        into[soname] = sorted(set(into.get(soname, [])) | set(versions))


def main():
    out_dir, binaries = sys.argv[1], sys.argv[2:]
    libs = resolved_libs(binaries)
    os.makedirs(os.path.join(out_dir, "lib"), exist_ok=True)
    binaries_need = {}
    for b in binaries:
        merge(binaries_need, version_needs(b))
    packed = {}
    for soname, path in sorted(libs.items()):
        # The x86 BCJ filter first: machine code compresses ~6% better (lzma.open reads it back as is).
        filters = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 9}]
        with open(path, "rb") as src, lzma.open(os.path.join(out_dir, "lib", soname + ".xz"), "wb", filters=filters) as dst:
            dst.write(src.read())
        packed[soname] = version_needs(path)
    with open(os.path.join(out_dir, "libs.json"), "w") as f:
        json.dump({"binaries_need": binaries_need, "packed": packed}, f, indent=1, sort_keys=True)
    print(f"pack_libs: {len(packed)} libraries: {', '.join(sorted(packed))}")


if __name__ == "__main__":
    main()
