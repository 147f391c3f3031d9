"""``fencelock``: look at and manage locks from a shell.

    fencelock [--url URL]... [--cluster | --sentinel SERVICE] [--prefix P]
              [--json] COMMAND ...

    inspect NAME         is NAME held? its fence and TTL
    list [PATTERN]       the held locks whose names match PATTERN (default *)
    force-release NAME   delete the lock whoever holds it and advance its fence
    watch NAME           one line per change of holder or fence

Every command is the library call of the same name (``Client.inspect``,
``list``, ``force_release``, ``watch``); this module only parses arguments
and prints. Exit status: 0 ok; 1 ``inspect``: the lock is free, ``list``:
nothing matched, ``force-release``: not confirmed; 2 bad usage (arguments,
name, pattern, URL); 3 Redis could not be asked (unreachable, refused).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Union

import fencelock

OK, NO, USAGE, REDIS = 0, 1, 2, 3

_Name = Union[str, bytes]


def _parser() -> argparse.ArgumentParser:
    # --json may come before or after the command; after it, SUPPRESS keeps
    # the subcommand from resetting what was given before it.
    late = argparse.ArgumentParser(add_help=False)
    late.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="fencelock",
        description="Inspect, list, force-release and watch fencelock locks in Redis.",
        epilog="URLs: --url (repeat it for Redlock nodes, cluster seeds or Sentinels), "
        "else $FENCELOCK_URL, else $REDIS_URL (several separated by commas). "
        "Exit status: 0 ok; 1 inspect: free, list: nothing matched, "
        "force-release: not confirmed; 2 bad usage; 3 Redis error.",
    )
    parser.add_argument("--url", action="append", metavar="URL", help="a Redis URL (repeatable)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cluster", action="store_true", help="the URLs are Redis Cluster seeds")
    where.add_argument("--sentinel", metavar="SERVICE", help="the URLs are Sentinels watching SERVICE")
    parser.add_argument("--prefix", help="the clients' key prefix (default fencelock:)")
    parser.add_argument("--tls-ca", metavar="PEM", help="trust only this CA (rediss://)")
    parser.add_argument("--tls-cert", metavar="PEM", help="client certificate (rediss://)")
    parser.add_argument("--tls-key", metavar="PEM", help="client certificate's key (rediss://)")
    parser.add_argument("--json", action="store_true", help="JSON output, one object per line")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the library's debug lines")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inspect = commands.add_parser("inspect", parents=[late], help="is NAME held? its fence and TTL")
    inspect.add_argument("name", metavar="NAME")
    listing = commands.add_parser("list", parents=[late], help="the held locks matching PATTERN")
    listing.add_argument("pattern", metavar="PATTERN", nargs="?", default="*",
                         help="Redis glob over lock names: * ? [a-z] \\ (default *)")
    force = commands.add_parser("force-release", parents=[late],
                                help="delete NAME's lock whoever holds it and advance its fence")
    force.add_argument("name", metavar="NAME")
    force.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    watch = commands.add_parser("watch", parents=[late], help="one line per change of NAME's holder or fence")
    watch.add_argument("name", metavar="NAME")
    watch.add_argument("--count", type=int, metavar="N", help="stop after N lines (the first is the lock now)")
    watch.add_argument("--interval", type=float, default=0.25, metavar="SECONDS",
                       help="ask Redis at least this often (default 0.25)")
    return parser


def _urls(given: Optional[List[str]]) -> List[str]:
    if given:
        return given
    for variable in ("FENCELOCK_URL", "REDIS_URL"):
        value = os.environ.get(variable, "").strip()
        if value:
            return [url.strip() for url in value.split(",") if url.strip()]
    raise _Usage("no Redis URL: pass --url or set FENCELOCK_URL or REDIS_URL")


class _Usage(Exception):
    """A usage error found after argparse (exit status 2)."""


def _client(args: argparse.Namespace) -> fencelock.Client:
    urls = _urls(args.url)
    options: Dict[str, Any] = {}
    if args.cluster:
        options["topology"] = "cluster"
    elif args.sentinel:
        options.update(topology="sentinel", service=args.sentinel)
    for option in ("prefix", "tls_ca", "tls_cert", "tls_key"):
        if getattr(args, option) is not None:
            options[option] = getattr(args, option)
    return fencelock.Client(urls[0] if len(urls) == 1 else urls, **options)


def _name(arg: str) -> _Name:
    """A command-line name: text, or the raw bytes a non-UTF-8 argument
    stands for (Python keeps them as surrogate escapes)."""
    try:
        arg.encode("utf-8")
        return arg
    except UnicodeEncodeError:
        return os.fsencode(arg)


def _shown(name: _Name) -> str:
    return name if isinstance(name, str) else name.decode("utf-8", "backslashreplace")


def _record(name: _Name, info: fencelock.LockInfo) -> Dict[str, Any]:
    record: Dict[str, Any] = {"name": _shown(name)}
    if isinstance(name, bytes):
        record["name_hex"] = name.hex()
    record.update(held=info.held, fence=info.fence,
                  ttl=None if info.ttl is None else round(info.ttl, 3))
    return record


def _line(name: _Name, info: fencelock.LockInfo) -> str:
    fence = "-" if info.fence is None else str(info.fence)
    ttl = f"  ttl={info.ttl:.3f}s" if info.ttl is not None else ""
    return f"{_shown(name)}  {'held' if info.held else 'free'}  fence={fence}{ttl}"


def _print(args: argparse.Namespace, text: str, record: Dict[str, Any]) -> None:
    print(json.dumps(record, ensure_ascii=False) if args.json else text, flush=True)


def _inspect(client: fencelock.Client, args: argparse.Namespace) -> int:
    name = _name(args.name)
    info = client.inspect(name)
    _print(args, _line(name, info), _record(name, info))
    return OK if info.held else NO


def _list(client: fencelock.Client, args: argparse.Namespace) -> int:
    found = NO
    for name, info in client.list(_name(args.pattern)):
        _print(args, _line(name, info), _record(name, info))
        found = OK
    return found


def _confirmed(name: _Name, info: fencelock.LockInfo) -> bool:
    print(f"force-release {_line(name, info)}? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _force_release(client: fencelock.Client, args: argparse.Namespace) -> int:
    name = _name(args.name)
    if not args.yes and not _confirmed(name, client.inspect(name)):
        print("not confirmed: nothing done", file=sys.stderr)
        return NO
    # The library logs the audit line (a warning on the "fencelock" logger).
    fence = client.force_release(name)
    _print(args, f"{_shown(name)}  force-released  fence={fence}",
           {"name": _shown(name), "force_released": True, "fence": fence})
    return OK


def _watch(client: fencelock.Client, args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 1:
        raise _Usage("--count must be at least 1")
    name = _name(args.name)
    shown = 0
    try:
        for info in client.watch(name, interval=args.interval):
            now = datetime.datetime.now(datetime.timezone.utc)
            at = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            _print(args, f"{at}  {_line(name, info)}", {"time": at, **_record(name, info)})
            shown += 1
            if shown == args.count:
                break
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a watch ends
    return OK


COMMANDS = {
    "inspect": _inspect,
    "list": _list,
    "force-release": _force_release,
    "watch": _watch,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console script's entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(format="%(name)s: %(levelname)s: %(message)s", stream=sys.stderr)
    logging.getLogger("fencelock").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        with _client(args) as client:
            return COMMANDS[args.command](client, args)
    except (_Usage, ValueError, TypeError) as error:
        print(f"fencelock: error: {error}", file=sys.stderr)
        return USAGE
    except fencelock.LockError as error:
        print(f"fencelock: {error}", file=sys.stderr)
        return REDIS
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
