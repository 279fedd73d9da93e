"""The commit a distribution or image was built from, written at build time.

In git this file says None: ``scripts/release.sh`` and the Dockerfile (build argument
``REVISION``) write the commit into the copy of the source they build, so a wheel, an
sdist and the image carry it without git (see ``artifactcheck.build_commit``).
"""

COMMIT: str | None = None
