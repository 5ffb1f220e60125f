"""``python -m plangate``: the same as the ``plangate`` console script."""

from plangate.cli import entry

if __name__ == "__main__":
    entry()
