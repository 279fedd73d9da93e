"""``python -m artifactcheck``: the same CLI as the console script."""

from artifactcheck.cli.entry import run

run()
