#!/usr/bin/env python3
"""Writes the acquire and constructor keyword lists from one table each
(``ACQUIRE`` and ``CLIENT`` below).

The keywords after ``name, ttl, *`` of every acquiring call (``acquire``,
``try_acquire``, ``lock``, the private ``_acquire`` /
``_try_acquire`` of the PyO3 layer; and after ``names, ttl, *`` of
``acquire_many`` and its kin) used to be written by hand 14 times in
three files. Now each of those places is a marked region that this script
fills from the table:

    python/fencelock/_native.pyi      the stubs of the compiled module
    python/fencelock/__init__.py      the Pythonic wrappers
    bindings/python/src/client.rs     the ``#[pyo3(signature = ...)]`` lines

A region is the lines between ``# <gen_stubs KIND [try] [lease=NAME]>`` and
``# </gen_stubs>`` (``//`` in Rust), indented like its opening marker:

    params     ``wait: Optional[float] = None,`` ... (Python signatures)
    forward    ``wait=wait,`` ... (passing them on in a call)
    signature  the ``#[pyo3(signature = (name, ttl, *, ...))]`` attribute

    client-params    the ``Client(url, *, ...)`` keywords (stubs)
    client-keywords  the Rust ``CLIENT_KEYWORDS`` that ``Client(url, **options)``
                     accepts

``try`` leaves out the keywords that only a waiting acquire takes (``wait``);
``kinds`` the ones only the mutex takes (``fair``: the semaphore and the
read-write lock's regions);
``lease=`` names the lease class ``on_lost`` is called with; ``as`` makes a
signature start ``(kind, name, ttl, *`` (the ``_acquire_as`` entries of the
semaphore and the read-write lock; ``kinds`` implied); ``many`` leaves out
the keywords of one lease (``on_lost``, ``fair``) and starts a signature
``(names, ttl, *`` (``acquire_many`` and its kin; no ``lease=``).

The Rust functions' own parameters stay hand-written: PyO3 fails to compile
when they differ from the generated signature attribute.

Usage (stdlib only, any Python >= 3.9):

    python3 python/tools/gen_stubs.py          # rewrite the regions
    python3 python/tools/gen_stubs.py --check  # exit 1 if a file is stale

``ci/test-python.sh`` runs ``--check``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional


class Keyword(NamedTuple):
    name: str
    # Python type; ``{lease}`` is the region's lease class.
    py_type: str
    py_default: str
    rust_default: str
    # Only a waiting acquire takes it (not try_acquire).
    waiting_only: bool = False
    # Only the mutex takes it (not a semaphore's or a read-write lock's
    # acquire: regions marked ``kinds``, and the Rust ``as`` signatures).
    mutex_only: bool = False
    # Only a one-name acquire takes it (not ``acquire_many``: regions
    # marked ``many``).
    single_only: bool = False


# THE acquire keywords, in signature order. Edit here, then run this script.
ACQUIRE = (
    Keyword("wait", "Optional[float]", "None", "None", waiting_only=True),
    Keyword("auto_renew", "bool", "False", "false"),
    Keyword("max_hold", "Optional[float]", "None", "None"),
    Keyword("on_lost", "Optional[Callable[[{lease}], object]]", "None", "None", single_only=True),
    Keyword("fair", "bool", "False", "false", mutex_only=True, single_only=True),
)

# THE constructor keywords of Client and AsyncClient, after ``url, *``.
CLIENT = (
    Keyword("prefix", "Optional[str]", "None", ""),
    Keyword("connect_timeout", "Optional[float]", "None", ""),
    Keyword("response_timeout", "Optional[float]", "None", ""),
    Keyword("topology", 'Optional[Literal["cluster", "sentinel"]]', "None", ""),
    Keyword("service", "Optional[str]", "None", ""),
    Keyword("replicas", "Optional[int]", "None", ""),
    Keyword("fence_grace", "Optional[float]", "None", ""),
    Keyword("tls_ca", "Optional[_Pem]", "None", ""),
    Keyword("tls_cert", "Optional[_Pem]", "None", ""),
    Keyword("tls_key", "Optional[_Pem]", "None", ""),
    Keyword("tls_server_name", "Optional[str]", "None", ""),
    Keyword("tls_dangerously_skip_verification", "bool", "False", ""),
)

ROOT = Path(__file__).resolve().parents[2]
FILES = (
    "python/fencelock/_native.pyi",
    "python/fencelock/__init__.py",
    "python/fencelock/_primitives.py",
    "bindings/python/src/client.rs",
)

OPEN = re.compile(r"^(?P<indent>\s*)(?P<comment>#|//) <gen_stubs (?P<spec>[^>]*)>\s*$")
CLOSE = re.compile(r"^\s*(#|//) </gen_stubs>\s*$")


def keywords(waiting: bool, mutex: bool, single: bool) -> List[Keyword]:
    return [
        k for k in ACQUIRE
        if (waiting or not k.waiting_only)
        and (mutex or not k.mutex_only)
        and (single or not k.single_only)
    ]


def render(kind: str, flags: Dict[str, Optional[str]], indent: str, where: str) -> List[str]:
    waiting = "try" not in flags
    single = "many" not in flags
    kws = keywords(waiting, mutex="kinds" not in flags and "as" not in flags, single=single)
    if kind == "params":
        lease = flags.get("lease")
        if not lease and single:
            raise SystemExit(f"{where}: a params region needs lease=NAME")
        return [f"{indent}{k.name}: {k.py_type.format(lease=lease)} = {k.py_default},\n" for k in kws]
    if kind == "forward":
        return [f"{indent}{k.name}={k.name},\n" for k in kws]
    if kind == "client-params":
        return [f"{indent}{k.name}: {k.py_type} = {k.py_default},\n" for k in CLIENT]
    if kind == "client-keywords":
        names = "".join(f'{indent}    "{k.name}",\n' for k in CLIENT)
        return [f"{indent}const CLIENT_KEYWORDS: &[&str] = &[\n", names, f"{indent}];\n"]
    if kind == "signature":
        args = ", ".join(f"{k.name}={k.rust_default}" for k in kws)
        lead = "kind, name, ttl" if "as" in flags else "name, ttl" if single else "names, ttl"
        return [f"{indent}#[pyo3(signature = ({lead}, *, {args}))]\n"]
    raise SystemExit(f"{where}: unknown region kind {kind!r}")


def generate(path: str, text: str) -> str:
    out: List[str] = []
    lines = text.splitlines(keepends=True)
    i = 0
    regions = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = OPEN.match(line)
        if not m:
            continue
        where = f"{path}:{i}"
        kind, *rest = m.group("spec").split()
        flags: Dict[str, Optional[str]] = {}
        for word in rest:
            key, _, value = word.partition("=")
            flags[key] = value or None
        while i < len(lines) and not CLOSE.match(lines[i]):
            if OPEN.match(lines[i]):
                raise SystemExit(f"{where}: region not closed before line {i + 1}")
            i += 1
        if i == len(lines):
            raise SystemExit(f"{where}: region not closed")
        out.extend(render(kind, flags, m.group("indent"), where))
        regions += 1
    if regions == 0:
        raise SystemExit(f"{path}: no <gen_stubs ...> region (markers removed?)")
    return "".join(out)


def main(argv: List[str]) -> int:
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for rel in FILES:
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        new = generate(rel, text)
        if new == text:
            continue
        if check:
            stale.append(rel)
        else:
            path.write_text(new, encoding="utf-8")
            print(f"gen_stubs: rewrote {rel}")
    if stale:
        print(
            "gen_stubs: the acquire keyword lists in "
            + ", ".join(stale)
            + " differ from the table in python/tools/gen_stubs.py.\n"
            "Edit ACQUIRE there (not the generated regions), then run\n"
            "    python3 python/tools/gen_stubs.py\n"
            "and commit the result.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
