# The artifactcheck controller image (k8s/deployment.yaml runs it).
#
#   DOCKER_BUILDKIT=1 docker build --pull=false \
#       --build-arg BASE=debian-python3:bookworm \
#       --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt \
#       --build-arg VERSION=0.2.0 --build-arg REVISION=$(git rev-parse HEAD) \
#       -t artifactcheck:0.2.0 .
#
# scripts/release.sh builds it this way, with the version, commit and source labels
# (docs/releasing.md).
#
# BASE        the runtime: a Debian/Ubuntu image with python3 (and ca-certificates for
#             HTTPS release sources and CDNs); nothing else is needed.
# BUILD_BASE  the build stage: the same distribution and Python, with python3-venv
#             (default: BASE; without python3-venv it is installed with apt-get). Both
#             must have python3 at /usr/bin/python3 and the same Python version: the
#             virtual environment is copied across. With a registry, for instance
#             BUILD_BASE=<debian:bookworm + python3> and
#             BASE=gcr.io/distroless/python3-debian12 (Python 3.11, no shell) -- untested
#             here, where no registry is reachable.
# VERSION, REVISION, SOURCE, CREATED  the OCI labels (org.opencontainers.image.*);
#             REVISION (a commit) is also written into the package, so that
#             `artifactcheck --version` in the image names the commit it was built from.
# secret "ca" optional: a CA bundle pip trusts for the package index (a TLS-inspecting
#             proxy or a private mirror); never stored in a layer.
#
# Needs BuildKit (RUN --mount): Docker >= 23 with buildx, or DOCKER_BUILDKIT=1 with the
# docker 20.10 CLI. No "# syntax=" line on purpose: the builder's own Dockerfile
# frontend is used, so nothing is pulled. The build stage downloads the dependencies'
# wheels from the package index (PIP_INDEX_URL etc. can be passed as build arguments);
# with no NAT for build containers, build with --network host.
ARG BASE=artifactcheck-base:bookworm
ARG BUILD_BASE=${BASE}

# --------------------------------------------------------------------------- build
FROM ${BUILD_BASE} AS build
ARG PIP_INDEX_URL
ARG REVISION=unknown
ARG PIP_EXTRA_INDEX_URL
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY artifactcheck ./artifactcheck
# 1. a throw-away venv with pip: the build tool;
# 2. the wheels: artifactcheck's own (built from this source) and every dependency's;
# 3. the runtime venv, made without pip, filled from those wheels only (--no-index),
#    byte-compiled now so that a read-only root file system costs nothing at start.
RUN --mount=type=secret,id=ca,required=false \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    case "$REVISION" in \
        *[!0-9a-f]* | "") ;; \
        *) printf 'COMMIT: str | None = "%s"\n' "$REVISION" >>artifactcheck/_build_info.py ;; \
    esac; \
    if ! python3 -m venv /tmp/tools >/dev/null 2>&1; then \
        rm -rf /tmp/tools; \
        apt-get update -q && apt-get install -y -q --no-install-recommends python3-venv; \
        python3 -m venv /tmp/tools; \
    fi; \
    /tmp/tools/bin/pip wheel --quiet --wheel-dir /wheels .; \
    python3 -m venv --without-pip /opt/artifactcheck; \
    /tmp/tools/bin/pip --python /opt/artifactcheck/bin/python install --quiet \
        --no-index --find-links /wheels artifactcheck; \
    /opt/artifactcheck/bin/python -m compileall -q /opt/artifactcheck/lib; \
    /opt/artifactcheck/bin/artifactcheck --help >/dev/null; \
    ls /wheels >/opt/artifactcheck/wheels.txt

# --------------------------------------------------------------------------- runtime
FROM ${BASE}
ARG BASE
ARG VERSION=0.2.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/artifactcheck/artifactcheck
LABEL org.opencontainers.image.title="artifactcheck" \
      org.opencontainers.image.description="Kubernetes controller: do your pods serve what their version says?" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.url="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"
COPY --from=build /opt/artifactcheck /opt/artifactcheck
ENV PATH=/opt/artifactcheck/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" uid/gid; no passwd entry is needed.
USER 65532:65532
WORKDIR /
EXPOSE 8080 8081
# exec form: no shell at run time; the script's #! is the venv's python.
ENTRYPOINT ["/opt/artifactcheck/bin/artifactcheck", "controller"]
CMD ["--json-logs"]
