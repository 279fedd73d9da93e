"""``python -m artifactcheck``: the same CLI as the console script."""

from .cli import main

main()
