"""The `needle` console command of the wheel: replaces this Python process with the bundled binary,
so signals, exit codes, stdin and stdout are the binary's own."""
import os
import sys

from needle_rl import BINARY


def main():
    os.execv(BINARY, ["needle"] + sys.argv[1:])
