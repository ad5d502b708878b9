"""Records what Lucene 9's StandardTokenizer (the one inside pyserini 0.22.1, Lucene 9.5.0) does
with every code point of planes 0-3 and 14, as the reference of index/bm25's tokenizer
(index/bm25/testdata/lucene_wordbreak.json, read by TestTokenizerMatchesLucene). Run by hand
in bench/pyserini_bm25.py's venv:

  JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 ~/.cache/needle/venv-pyserini/bin/python \
      bench/lucene_wordbreak.py index/bm25/testdata/lucene_wordbreak.json

Each code point c is put in the probes below (the same list is in index/bm25/wordbreak_test.go);
its signature is, per probe, the tokens' [start, end) in code points. Consecutive code points with
the same signature are written as one range [first, last, signature].
"""
import json
import sys

PROBES = ["a{c}a", "1{c}1", "{c}", "{c}{c}", "\u05d0{c}\u05d0", "{c}a", "\u30ab{c}\u30ab",
          "\u263a{c}", "{c}\u20e3", "\U0001F466{c}", "\U0001F468\u200d{c}"]
SEP = "\n\n"


def code_points():
    for cp in range(0x40000):
        if not 0xD800 <= cp <= 0xDFFF:
            yield cp
    yield from range(0xE0000, 0xE01F0)


def u16len(s):
    return sum(2 if ord(ch) > 0xFFFF else 1 for ch in s)


def main(out):
    import pyserini.analysis  # noqa: F401 (puts pyserini's Anserini/Lucene jar on the JVM's class path)
    from jnius import autoclass, cast
    StandardTokenizer = autoclass("org.apache.lucene.analysis.standard.StandardTokenizer")
    StringReader = autoclass("java.io.StringReader")
    OffsetAttribute = autoclass("org.apache.lucene.analysis.tokenattributes.OffsetAttribute")
    tok = StandardTokenizer()
    off = tok.addAttribute(OffsetAttribute)
    off = cast("org.apache.lucene.analysis.tokenattributes.OffsetAttribute", off)

    cps = list(code_points())
    sigs = []
    for i in range(0, len(cps), 2000):
        chunk = cps[i:i + 2000]
        probes, starts, pos = [], [], 0  # starts: UTF-16 offset of each probe
        for cp in chunk:
            for p in PROBES:
                s = p.replace("{c}", chr(cp))
                probes.append(s)
                starts.append(pos)
                pos += u16len(s) + len(SEP)
        text = SEP.join(probes)
        tok.setReader(StringReader(text))
        tok.reset()
        spans = [[] for _ in probes]
        j = 0
        while tok.incrementToken():
            a, b = off.startOffset(), off.endOffset()
            while j + 1 < len(starts) and starts[j + 1] <= a:
                j += 1
            spans[j].append((a - starts[j], b - starts[j]))
        tok.end()
        tok.close()
        for k, cp in enumerate(chunk):
            sig = []
            for n in range(len(PROBES)):
                s = probes[k * len(PROBES) + n]
                u2c, u = {}, 0  # UTF-16 offset -> code point index
                for ci, ch in enumerate(s):
                    u2c[u] = ci
                    u += 2 if ord(ch) > 0xFFFF else 1
                u2c[u] = len(s)
                sig.append(",".join(f"{u2c[a]}-{u2c[b]}" for a, b in spans[k * len(PROBES) + n]))
            sigs.append((cp, "|".join(sig)))
    ranges = []
    for cp, sig in sigs:
        if ranges and ranges[-1][2] == sig and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, sig])
    with open(out, "w") as f:
        json.dump({"lucene": autoclass("org.apache.lucene.util.Version").LATEST.toString(), "probes": PROBES,
                   "ranges": ranges}, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(len(sigs), "code points,", len(ranges), "ranges")


if __name__ == "__main__":
    main(sys.argv[1])
