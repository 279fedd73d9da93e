#!/bin/sh
# Build, sign and check a release of artifactcheck from the committed HEAD.
#
#   scripts/release.sh VERSION
#
# VERSION must be pyproject.toml's (and sim/pyproject.toml's) version: the one source of
# truth, which the release only confirms. Everything is built from `git archive HEAD`
# (what is committed, never the work tree's changes) with artifactcheck/_build_info.py
# naming the commit, and SOURCE_DATE_EPOCH set to the commit's time. Into $OUT
# (default dist/, which must be empty or absent):
#
#   artifactcheck-V-py3-none-any.whl, artifactcheck-V.tar.gz   python -m build, twine check
#   sim/artifactcheck_sim-V-...whl, sim/artifactcheck_sim-V.tar.gz   the simulator, apart
#   artifactcheck-V.cdx.json         CycloneDX SBOM of the Python environment the image
#                                    installs (the wheel and its dependencies, resolved
#                                    as the Dockerfile resolves them; cyclonedx-py)
#   artifactcheck-V-install.yaml     k8s/ rendered (kubectl kustomize) with the image
#                                    pinned to $IMAGE:V; k8s/ itself is never edited
#   artifactcheck-V-image.txt        the image's reference and id (when an engine runs)
#   artifactcheck-V.release.json     the release manifest of all the above
#                                    (`artifactcheck manifest build`, by the wheel just built)
#   artifactcheck-V.release.json.intoto.jsonl   its DSSE envelope (`manifest sign`)
#
# Environment:
#   ARTIFACTCHECK_RELEASE_KEY_FILE   the signing key (PEM PKCS#8; Ed25519 or ECDSA P-256)
#   ARTIFACTCHECK_RELEASE_KEY        or the key itself (a CI secret); never written to $OUT
#   ARTIFACTCHECK_KEY_PASSPHRASE     an encrypted key's passphrase
#   ARTIFACTCHECK_RELEASE_PUBLIC_KEY the public key the release is checked with at the end
#                                    (default: derived from the signing key)
#   UNSIGNED=1                       build without a key: no envelope (a dry run)
#   IMAGE=artifactcheck              the image's name (a registry path) in the tag and k8s
#   DOCKER_IMAGE=auto|yes|no         build the image: auto = when `docker info` answers
#   BASE, BUILD_BASE                 the Dockerfile's base images (see Dockerfile)
#   CA_BUNDLE                        a CA bundle the image build's pip trusts (the
#                                    Dockerfile's secret "ca"), for a TLS-inspecting proxy
#   DOCKER=docker                    a docker CLI that builds with BuildKit (buildx, or the
#                                    20.10 CLI); DOCKER_HOST picks the engine as usual
#   SOURCE=https://github.com/artifactcheck/artifactcheck   the source label and repository
#   PYTHON=.venv/bin/python          a Python with the dev extra (build, twine, cyclonedx-bom,
#                                    setuptools, kubectl): `sh scripts/setup.sh install dev`
#   OUT=dist                         where the release goes
#
# Exit status: 0 built and checked, 2 misconfiguration, anything else a failed step.
# docs/releasing.md tells how a user checks a download; k8s/integrations/ci/ has this as a
# CI job.
set -eu

say() { printf 'release: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

[ $# -eq 1 ] || die "usage: scripts/release.sh VERSION"
version=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-$repo/.venv/bin/python}
out=${OUT:-dist}
image_name=${IMAGE:-artifactcheck}
source_url=${SOURCE:-https://github.com/artifactcheck/artifactcheck}
want_image=${DOCKER_IMAGE:-auto}
docker=${DOCKER:-docker}

# -- what is released, checked before anything is built ------------------------------
[ -x "$python" ] || die "PYTHON=$python: not found (sh scripts/setup.sh install dev)"
for project in pyproject.toml sim/pyproject.toml; do
    declared=$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$project")
    [ "$declared" = "$version" ] \
        || die "VERSION $version: $project says $declared (change it there first, and commit)"
done
for module in build twine cyclonedx_py setuptools; do
    "$python" -c "import $module" 2>/dev/null \
        || die "PYTHON=$python has no $module: sh scripts/setup.sh install dev"
done
kubectl=$(dirname "$python")/kubectl
[ -x "$kubectl" ] || kubectl=$(command -v kubectl) || die "no kubectl (sh scripts/setup.sh install dev)"
commit=$(git rev-parse --verify HEAD) || die "not a git checkout with a commit"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    say "note: the work tree has uncommitted changes; the release is built from $commit only"
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
    die "OUT=$out: not empty (an old file there would be signed as part of $version)"
fi
key_file=${ARTIFACTCHECK_RELEASE_KEY_FILE:-}
if [ -z "$key_file" ] && [ -z "${ARTIFACTCHECK_RELEASE_KEY:-}" ] && [ "${UNSIGNED:-}" != 1 ]; then
    die "no signing key: set ARTIFACTCHECK_RELEASE_KEY_FILE or ARTIFACTCHECK_RELEASE_KEY (UNSIGNED=1 for a dry run)"
fi
[ -z "$key_file" ] || [ -r "$key_file" ] || die "ARTIFACTCHECK_RELEASE_KEY_FILE=$key_file: cannot read"
case $want_image in
    auto) if "$docker" info >/dev/null 2>&1; then want_image=yes; else want_image=no; fi ;;
    yes | no) ;;
    *) die "DOCKER_IMAGE=$want_image: auto, yes or no" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM  # the EXIT trap still removes the work folder (and a key file)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct "$commit")
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

# -- the source: the commit, stamped -------------------------------------------------
say "source: $commit ($created)"
mkdir "$work/src"
git archive --format=tar "$commit" | tar -x -C "$work/src"
printf 'COMMIT: str | None = "%s"\n' "$commit" >>"$work/src/artifactcheck/_build_info.py"

# -- the distributions ---------------------------------------------------------------
say "building the distributions (python -m build)"
"$python" -m build --no-isolation --sdist --wheel --outdir "$out" "$work/src" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; exit 1; }
"$python" -m build --no-isolation --sdist --wheel --outdir "$out/sim" "$work/src/sim" >"$work/build-sim.log" 2>&1 \
    || { cat "$work/build-sim.log" >&2; exit 1; }
"$python" -m twine check --strict "$out"/*.whl "$out"/*.tar.gz "$out"/sim/* >&2
wheel=$(ls "$out"/artifactcheck-"$version"-*.whl)

# -- the environment the image installs: its SBOM, and the tool that signs --------------
# The Dockerfile installs the wheel and its dependencies from the package index into a
# venv; so does this, and cyclonedx-py reads that venv (installed distributions, their
# versions, licences and hashes of nothing guessed).
say "the image's Python environment, and its SBOM (cyclonedx-py)"
# Like the image's, the venv has no pip (nor setuptools): what is in it is what runs.
"$python" -m venv --without-pip "$work/env" >&2
"$python" -m pip --python "$work/env/bin/python" install --quiet --disable-pip-version-check \
    "$wheel" >&2
"$python" -m cyclonedx_py environment --output-reproducible --of JSON \
    --pyproject "$work/src/pyproject.toml" --output-file "$out/artifactcheck-$version.cdx.json" "$work/env/bin/python" >&2
installed=$("$work/env/bin/artifactcheck" --version)
[ "$installed" = "artifactcheck $version (commit $commit)" ] \
    || { say "the built wheel says '$installed', not $version at $commit"; exit 1; }

# -- the install manifests -----------------------------------------------------------
say "k8s install manifests, image $image_name:$version"
mkdir "$work/k8s"
cp -R k8s "$work/k8s/base"
cat >"$work/k8s/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - base
images:
  - name: artifactcheck
    newName: $image_name
    newTag: "$version"
EOF
"$kubectl" kustomize "$work/k8s" >"$out/artifactcheck-$version-install.yaml"
grep -q "image: $image_name:$version\$" "$out/artifactcheck-$version-install.yaml" \
    || { say "the rendered manifests do not run $image_name:$version"; exit 1; }

# -- the image -----------------------------------------------------------------------
if [ "$want_image" = yes ]; then
    say "image $image_name:$version (docker build --pull=false)"
    DOCKER_BUILDKIT=1 "$docker" build --pull=false --network host --quiet \
        ${CA_BUNDLE:+--secret id=ca,src="$CA_BUNDLE"} ${BASE:+--build-arg BASE="$BASE"} ${BUILD_BASE:+--build-arg BUILD_BASE="$BUILD_BASE"} \
        --build-arg VERSION="$version" --build-arg REVISION="$commit" \
        --build-arg CREATED="$created" --build-arg SOURCE="$source_url" \
        -t "$image_name:$version" "$work/src" >&2
    image_id=$("$docker" image inspect --format '{{.Id}}' "$image_name:$version")
    in_image=$("$docker" run --rm --network none --entrypoint artifactcheck "$image_name:$version" --version)
    [ "$in_image" = "artifactcheck $version (commit $commit)" ] \
        || { say "the image says '$in_image'"; exit 1; }
    printf '%s:%s %s\n' "$image_name" "$version" "$image_id" >"$out/artifactcheck-$version-image.txt"
else
    say "no Docker engine (or DOCKER_IMAGE=no): no image"
fi

# -- the signed release manifest -----------------------------------------------------
release="$out/artifactcheck-$version.release.json"
"$work/env/bin/artifactcheck" manifest build "$out" --version "$version" --output "$work/release.json"
mv "$work/release.json" "$release"
if [ "${UNSIGNED:-}" = 1 ] && [ -z "$key_file" ] && [ -z "${ARTIFACTCHECK_RELEASE_KEY:-}" ]; then
    say "UNSIGNED=1: no envelope"
else
    if [ -z "$key_file" ]; then
        key_file="$work/release.key"
        (umask 077 && printf '%s\n' "$ARTIFACTCHECK_RELEASE_KEY" >"$key_file")
    fi
    "$work/env/bin/artifactcheck" manifest sign "$release" --key "$key_file" \
        --repository "$source_url" --commit "$commit" --build-time "$created"
    public=${ARTIFACTCHECK_RELEASE_PUBLIC_KEY:-}
    if [ -z "$public" ]; then
        public="$work/release.pub"
        "$work/env/bin/python" - "$key_file" "$public" <<'EOF'
import os, sys
from cryptography.hazmat.primitives import serialization
secret = os.environ.get("ARTIFACTCHECK_KEY_PASSPHRASE")
key = serialization.load_pem_private_key(
    open(sys.argv[1], "rb").read(), secret.encode() if secret else None
)
open(sys.argv[2], "wb").write(key.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
EOF
    fi
    say "checking the release as a user would (manifest verify)"
    find "$out" -type f ! -name "$(basename "$release")*" -print0 | sort -z \
        | xargs -0 "$work/env/bin/artifactcheck" manifest verify \
            --manifest "$release" --key "$public" >&2
fi
say "release $version of $commit in $out:"
(cd "$out" && find . -type f | sort | sed 's|^\./|  |') >&2
