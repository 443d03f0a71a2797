"""dulwich as a client of vole's smart HTTP, for the integration tests.

usage: python3 dulwich_client.py clone URL DIR | push DIR URL REF
"""
import sys

from dulwich import porcelain


def main(argv):
    command = argv[1]
    if command == "clone":
        porcelain.clone(argv[2], argv[3], errstream=sys.stderr.buffer)
    elif command == "push":
        ref = argv[4].encode()
        porcelain.push(argv[2], argv[3], [ref + b":" + ref], errstream=sys.stderr.buffer)
    else:
        raise SystemExit(f"unknown command {command}")
    print(f"{command} ok")


if __name__ == "__main__":
    main(sys.argv)
