#!/usr/bin/env bash
# Install what the Docker tests (tests/docker) need on a Debian machine, idempotently:
#   docker.io       dockerd, which the tests start themselves on a private socket
#   busybox-static  the statically linked /bin/busybox put into the test images
#   iptables        dockerd's dependency; the tests compare rules before and after
#   iproute2        `ip`, to make and delete the private daemon's bridge
# Nothing is started here and no image is pulled: there is no registry in CI.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(docker.io busybox-static iptables iproute2)
missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

# busybox-static replaces (conflicts with) the dynamic busybox package; its binary is
# /bin/busybox, copied into the images, where no libc exists.
if [ ! -x /bin/busybox ]; then
    echo "docker.sh: /bin/busybox missing after installing busybox-static" >&2
    exit 1
fi
command -v dockerd >/dev/null
echo "docker.sh: $(dockerd --version); busybox-static $(dpkg-query -W -f='${Version}' busybox-static)"
