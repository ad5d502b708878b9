"""Writes a corpus of real English text from files that Debian 12 packages ship, and queries
drawn from it, for the by-hand BM25 parity check against pyserini at the size of issue 38's
hidden corpus (~64,000 documents, 2,000 natural and 100 odd queries;
docs/measurements/2026-12-01-bm25-real-text.md). The 64,000-row output is not committed (rebuild it);
index/bm25/testdata holds a 600-row one (the command below).

Sources (install these exact versions first; the man pages and licenses are already on a
Debian 12 system, from manpages, manpages-dev and base-files):
  apt-get install --no-install-recommends fortunes=1:1.99.1-7.3 fortunes-min=1:1.99.1-7.3 \
    perl-doc=5.36.0-7+deb12u4 python3.11-doc=3.11.2-6+deb12u9 debian-reference-en=2.100 \
    dict-foldoc=20230119-1 dict-jargon=4.4.7-3.1 dict-gcide=0.48.5+nmu2
  (and manpages=6.03-2 manpages-dev=6.03-2, base-files as installed)

  python3 bench/realtext_corpus.py CORPUS.jsonl QUERIES.jsonl [ROWS [NATURAL [SOURCES]]]
      # ROWS 64000, NATURAL (queries) 2000, SOURCES all; index/bm25/testdata's realtext_* were
      # made with: realtext_corpus.jsonl realtext_queries.jsonl 600 300 free

Rows are {"id", "contents": "\"Title\"\ntext"} as Search-R1's wiki-18 rows are: dictionary
entries (one in six of GCIDE = Webster 1913, FOLDOC, the Jargon File), fortunes, and passages of ~100 words
of Perl's pod pages, Python's reST sources, the Debian Reference, man pages and the common
licenses, with their own symbols (©, ®, ™, dashes, curly quotes, code, URLs, numbers) kept;
only markup is taken out. A seeded shuffle picks ROWS of them. Queries: 2,000 natural ones
(spans of 2-14 words of a row, titles, and questions made of them) and the odd ones of ODD.
The python is the system's python3 (standard library only).
"""
import glob
import gzip
import html
import json
import os
import random
import re
import subprocess
import sys

WORDS = 100  # a passage: paragraphs joined until it holds about this many words


def dict_entries(name):
    """(headword, body) of a dictd dictionary; entries sharing an offset are one."""
    data = gzip.open(f"/usr/share/dictd/{name}.dict.dz").read()
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def num(s):
        n = 0
        for c in s:
            n = n * 64 + b64.index(c)
        return n

    seen = set()
    for line in open(f"/usr/share/dictd/{name}.index", encoding="utf-8"):
        head, off, size = line.rstrip("\n").split("\t")
        if head.startswith("00-database") or off in seen:
            continue
        seen.add(off)
        body = data[num(off):num(off) + num(size)].decode("utf-8", "replace")
        yield head, body


def fortunes():
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(path):  # .dat indexes and .u8 links
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for i, f in enumerate(text.split("\n%\n")):
            if f.strip():
                yield f"{os.path.basename(path)} {i}", f


def passages(title, paragraphs):
    """Consecutive paragraphs joined into passages of about WORDS words."""
    cur, n = [], 0
    for p in paragraphs:
        p = p.strip()
        if not p:
            continue
        cur.append(p)
        n += len(p.split())
        if n >= WORDS:
            yield title, "\n".join(cur)
            cur, n = [], 0
    if cur:
        yield title, "\n".join(cur)


def pod_pages():
    for path in sorted(glob.glob("/usr/share/perl/5.36*/pod/*.pod")):
        text = open(path, encoding="utf-8", errors="replace").read()
        text = re.sub(r"^=(?:over|back|item|begin|end|for|encoding|cut|pod)\b.*$", "", text, flags=re.M)
        title = os.path.basename(path)[:-4]
        for sec in re.split(r"^=head\d\s*", text, flags=re.M):
            head, _, body = sec.partition("\n")
            yield from passages(f"{title}: {head.strip()}", body.split("\n\n"))


def rst_pages():
    for path in sorted(glob.glob("/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", recursive=True)):
        text = open(path, encoding="utf-8", errors="replace").read()
        text = re.sub(r"^\.\. .*$", "", text, flags=re.M)  # directives and comments
        text = re.sub(r"^[=\-~^*#\"']{3,}\s*$", "", text, flags=re.M)  # section underlines
        title = path.split("_sources/")[1][:-8]
        yield from passages(title, text.split("\n\n"))


def html_pages():
    for path in sorted(glob.glob("/usr/share/debian-reference/*.en.html")):
        text = open(path, encoding="utf-8", errors="replace").read()
        text = re.sub(r"(?s)<(script|style|head)\b.*?</\1>", "", text)
        text = re.sub(r"(?i)</?(p|div|pre|li|h\d|tr|table|dt|dd)\b[^>]*>", "\n\n", text)
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
        yield from passages("Debian Reference " + os.path.basename(path)[:-8], text.split("\n\n"))


def man_pages():
    files = subprocess.run(["dpkg", "-L", "manpages", "manpages-dev"], capture_output=True, text=True).stdout.split()
    for path in sorted(f for f in files if f.endswith(".gz") and "/man/man" in f):
        text = gzip.open(path).read().decode("utf-8", "replace")
        text = re.sub(r"^\.(?:SH|SS)\s+(.*)$", r"\n\n\1\n\n", text, flags=re.M)
        text = re.sub(r"^\.(?:PP|P|LP|TP|IP|sp|br)\b.*$", "\n\n", text, flags=re.M)
        text = re.sub(r"^\.\S+\s?", "", text, flags=re.M)  # other requests: keep their text
        text = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\[&\-e]", lambda m: "-" if m.group() == "\\-" else "", text)
        yield from passages("man " + os.path.basename(path)[:-3], text.split("\n\n"))


def licenses():
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path) and not os.path.islink(path):
            text = open(path, encoding="utf-8", errors="replace").read()
            yield from passages(os.path.basename(path) + " license", text.split("\n\n"))


def rows():
    # GCIDE alone holds 126,240 entries: one in six keeps it beside the other sources
    yield from (e for i, e in enumerate(dict_entries("gcide")) if i % 6 == 0)
    for name in ("foldoc", "jargon"):
        yield from dict_entries(name)
    for src in (fortunes, pod_pages, rst_pages, html_pages, man_pages, licenses):
        yield from src()


def free_rows():
    """The source whose text may sit in this repository's testdata: the Jargon File (public
    domain, as its Debian copyright file says)."""
    yield from dict_entries("jargon")


ODD = [
    "", " ", "the", "the of and to a in", "is it or not", "a an the and but if or",
    "©", "®", "™", "© 2007 Free Software Foundation, Inc.", "Copyright © 1989, 1991", "Unix™ and Linux®",
    "👍", "😀 smile", "👍🏽", "👨‍👩‍👧 family", "🇺🇸 flag", "#️⃣", "emoji 🎉 party",
    "zero\u200bwidth", "soft\u00adhyphen word", "zero\u200cwidth non\u200djoiner", "\ufeffbyte order mark",
    "perl's regular expressions", "Larry Wall’s Perl", "the hacker's dictionary", "Webster's definition",
    "bug-compatible", "well-known port numbers", "e-mail address", "re-entrant", "—", "em—dash",
    "“quoted” words", "«guillemets»", "…", "foo_bar_baz", "__init__", "os.path.join()",
    "printf(\"%d\\n\", x);", "$_ @ARGV %ENV", "s/foo/bar/g", "#include <stdio.h>", "a->b", "x += 1",
    "C++ templates", "C# language", ".NET framework", "IPv6 ::1", "127.0.0.1", "192.168.0.1/24",
    "https://docs.python.org/3/library/os.html", "http://www.gnu.org/licenses/", "www.debian.org",
    "user@example.com", "ftp://ftp.gnu.org/gnu/", "/etc/apt/sources.list", "C:\\Windows\\System32",
    "3.14159", "1,000,000", "2006-10-10", "1e-10", "0x7fffffff", "-1", "42", "10:30", "v1.2.3",
    "½ ¼ ¾", "°C", "±5%", "$100", "€50", "£ pound", "§ 1.2", "¶", "µs latency", "π r²",
    "naïve café résumé", "Ærø Straße", "Ελληνικά λέξεις", "русский текст", "日本語のテキスト", "中文文本检索",
    "한국어 텍스트", "العربية نص", "עברית טקסט", "हिन्दी पाठ", "ภาษาไทย", "Tiếng Việt",
    "mixed English and русский and 中文", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ", "ﬁ ligature ﬂ",
    "e\u0301 combining acute", "Ⅳ Roman numeral", "①②③", "™®© together", "a" * 300,
    " ".join(["word"] * 50), "UPPER CASE QUERY", "tab\tseparated\tquery", "new\nline query",
    "what is the meaning of life, the universe, and everything?",
]


def natural_queries(docs, n, rng):
    """Spans of a row's text (2-14 words), its title, or a question made of either."""
    out = []
    while len(out) < n:
        title, text = docs[rng.randrange(len(docs))]
        words = text.split()
        if len(words) < 4:
            continue
        kind = rng.random()
        size = rng.randint(2, min(14, len(words)))
        i = rng.randrange(len(words) - size + 1)
        span = " ".join(words[i:i + size])
        if kind < 0.55:
            q = span
        elif kind < 0.7:
            q = title
        elif kind < 0.85:
            q = f"what is {title}?"
        else:
            q = f"{rng.choice(['how do I', 'why does', 'when was', 'who said', 'where is'])} {span.rstrip('.,;:')}?"
        out.append(q)
    return out


def main(corpus, queries, n=64000, natural=2000, sources="all"):
    rng = random.Random(20261201)
    docs = [(t, re.sub(r"[ \t]+", " ", b).strip()) for t, b in {"all": rows, "free": free_rows}[sources]()]
    docs = [d for d in docs if d[1]]
    print(f"{len(docs)} candidate rows", file=sys.stderr)
    rng.shuffle(docs)
    docs = docs[:int(n)]
    with open(corpus, "w", encoding="utf-8") as f:
        for i, (t, b) in enumerate(docs):
            f.write(json.dumps({"id": str(i), "contents": f'"{t}"\n{b}'}, ensure_ascii=False) + "\n")
    with open(queries, "w", encoding="utf-8") as f:
        for q in natural_queries(docs, int(natural), rng) + ODD:
            f.write(json.dumps({"query": q}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
