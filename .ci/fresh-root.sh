#!/usr/bin/env bash
# The README's promise, checked: its demo command run on a fresh clone in a fresh Debian
# root file system (mmdebstrap: python3, git, ca-certificates and nothing else), as root
# in a chroot that shares this machine's network. Where a root file system cannot be
# made (not root, no mmdebstrap, no mount), the same command runs in a fresh clone
# outside a chroot instead: a new virtual environment with no site packages.
#   bash .ci/fresh-root.sh            # SUITE=bookworm|trixie, default this machine's
#   FRESH_ROOT=0 bash .ci/fresh-root.sh   # skip the root file system, fresh clone only
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
case $codename in bookworm | trixie | forky) ;; *) codename=bookworm ;; esac
suite=${SUITE:-$codename}
work=$(mktemp -d /tmp/ac-fresh-root.XXXXXX)
root=$work/root
mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" 2>/dev/null || true
    done
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# The README's first shell line that mentions "demo", its comment dropped.
cmd=$(awk '/^```(sh|bash|shell|console)?$/{f=!f;next} f' "$repo/README.md" \
    | grep -m1 -E 'demo' | sed 's/[[:space:]]#.*$//')
[ -n "$cmd" ] || { echo "fresh-root: no demo command in README.md" >&2; exit 1; }
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    echo "fresh-root: note: uncommitted changes are not in the clone that is checked" >&2
fi
t0=$(date +%s)

# A CA this machine trusts (a TLS-inspecting proxy to the package index) is trusted in
# the fresh system too: its bundle is copied in, as a real machine would have it.
bundle=/etc/ssl/certs/ca-certificates.crt
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
    if [ -n "${!var:-}" ] && [[ ${!var} != *file:* ]]; then envs+=("$var=${!var}"); fi
done
if [ -s "$bundle" ]; then
    envs+=(PIP_CERT=$bundle SSL_CERT_FILE=$bundle REQUESTS_CA_BUNDLE=$bundle)
fi

chroot_ok=0
if [ "${FRESH_ROOT:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v mmdebstrap >/dev/null; then
    if mmdebstrap --variant=minbase --include=python3,ca-certificates,git "$suite" "$root" \
        >"$work/mmdebstrap.log" 2>&1; then
        chroot_ok=1
    else
        echo "fresh-root: mmdebstrap $suite failed:" >&2
        tail -5 "$work/mmdebstrap.log" >&2
    fi
fi
if [ $chroot_ok = 1 ]; then  # a container without CAP_SYS_ADMIN cannot mount: fall back
    if mount -t proc proc "$root/proc"; then mounted+=("$root/proc"); else chroot_ok=0; fi
    if [ $chroot_ok = 1 ] && mount --bind /dev "$root/dev"; then
        mounted+=("$root/dev")
    else
        chroot_ok=0
    fi
fi
if [ $chroot_ok = 1 ]; then
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    if [ -s "$bundle" ]; then cp "$bundle" "$root$bundle"; fi
    git clone -q "$repo" "$root/src"
    echo "fresh-root: Debian $suite root file system ($(($(date +%s) - t0))s), clone of" \
        "$(git -C "$repo" rev-parse --short HEAD): $cmd"
    set +e
    env -i "${envs[@]}" chroot "$root" bash -c "cd /src && $cmd" >"$work/run.log" 2>&1
    rc=$?
    set -e
else
    why="needs root, mmdebstrap and mount"
    [ "${FRESH_ROOT:-1}" != 0 ] || why="FRESH_ROOT=0"
    echo "fresh-root: no root file system ($why); a fresh clone with a new virtual" \
        "environment instead: $cmd"
    git clone -q "$repo" "$work/src"
    set +e
    (cd "$work/src" && env -i "${envs[@]}" bash -c "$cmd") >"$work/run.log" 2>&1
    rc=$?
    set -e
fi
tail -12 "$work/run.log"
echo "fresh-root: exit status $rc after $(($(date +%s) - t0))s"
if [ $rc != 0 ]; then
    echo "fresh-root: the README's demo command failed on a fresh system; full output:" >&2
    cat "$work/run.log" >&2
fi
exit $rc
