"""``python -m sweeper``: the same command as the ``sweeper`` console script."""

from sweeper.cli import main

main()
