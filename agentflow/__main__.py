"""The ``agentflow`` command: ``agentflow demo [--approve | --deny [REASON]]``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="agentflow", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="the approval flow over real HTTP against a built-in replay server")
    decision = demo.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve without asking")
    decision.add_argument("--deny", nargs="?", const="", metavar="REASON",
                          help="reject without asking, with an optional reason")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as demo_module
        if args.approve:
            return demo_module.main(True)
        if args.deny is not None:
            return demo_module.main(False, args.deny or None)
        return demo_module.main()
    return 2


if __name__ == "__main__":
    sys.exit(main())
