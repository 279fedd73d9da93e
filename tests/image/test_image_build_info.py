"""The image says what it is: ``artifactcheck --version`` in it names the version and
the commit given as ``REVISION``, and its OCI labels say the same (scripts/release.sh
builds the released image so)."""

from __future__ import annotations

from typing import Any

from .conftest import Built, head_commit, pyproject_version


def test_the_image_names_its_version_and_commit(
    controller_image: Built, docker_client: Any
) -> None:
    commit = head_commit()
    out = docker_client.containers.run(
        controller_image.tag, entrypoint=["artifactcheck", "--version"], remove=True
    )
    assert out.decode() == f"artifactcheck {pyproject_version()} (commit {commit})\n"
    labels = docker_client.api.inspect_image(controller_image.tag)["Config"]["Labels"]
    assert labels["org.opencontainers.image.revision"] == commit
    assert labels["org.opencontainers.image.version"] == pyproject_version()
