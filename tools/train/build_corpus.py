#!/usr/bin/env python3
"""Builds the training corpus from text every Debian 12 machine has: the Python 3.11 standard
library's sources (less its tests) and the packages' copyright files and Debian changelogs under
/usr/share/doc. The file list is sorted, so the same machine image gives the same corpus; every 50th
document goes to the held-out set. Writes corpus.txt.gz, heldout.txt.gz and manifest.json (each file,
its licence source and SHA-256) into OUT.

  python3 tools/train/build_corpus.py OUT [--max-mb 24]
"""
import argparse
import glob
import gzip
import hashlib
import json
import os


def sources():
    py = sorted(p for p in glob.glob("/usr/lib/python3.11/**/*.py", recursive=True)
                if "/test/" not in p and "/tests/" not in p and "site-packages" not in p and "dist-packages" not in p)
    for p in py:
        yield p, "PSF-2.0 (/usr/share/doc/python3.11/copyright)"
    for p in sorted(glob.glob("/usr/share/doc/*/copyright")):
        yield p, "the file itself (a package's copyright statement)"
    for p in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
        yield p, "the package's own licence (its copyright file beside it)"


def read(path):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--max-mb", type=float, default=24)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train, held, manifest = [], [], []
    total = 0
    for i, (path, licence) in enumerate(sources()):
        text = read(path)
        if not text.strip():
            continue
        if total + len(text) > args.max_mb * 1e6:
            break
        total += len(text)
        (held if i % 50 == 49 else train).append(text)
        manifest.append({"path": path, "licence": licence, "bytes": len(text),
                         "sha256": hashlib.sha256(text.encode()).hexdigest(), "heldout": i % 50 == 49})
    sep = "\n\n"
    for name, docs in (("corpus.txt.gz", train), ("heldout.txt.gz", held)):
        with gzip.GzipFile(os.path.join(args.out, name), "wb", mtime=0) as f:
            f.write(sep.join(docs).encode())
    digest = hashlib.sha256("".join(m["sha256"] for m in manifest).encode()).hexdigest()
    json.dump({"documents": len(manifest), "bytes": total, "train_documents": len(train),
               "heldout_documents": len(held), "digest": digest, "files": manifest},
              open(os.path.join(args.out, "manifest.json"), "w"), indent=1)
    print("corpus: %d documents, %.1f MB (%d held out), digest %s" % (len(manifest), total / 1e6, len(held), digest))


if __name__ == "__main__":
    main()
