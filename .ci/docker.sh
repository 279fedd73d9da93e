#!/usr/bin/env bash
# Install the system packages the tests need on a Debian machine, idempotently:
#   docker.io       dockerd, which the tests start themselves on a private socket
#   busybox-static  the statically linked /bin/busybox put into the test images
#   iptables        dockerd's dependency; the tests compare rules before and after
#   iproute2        `ip`, to make and delete the private daemon's bridge
#   mmdebstrap      Debian root file systems: the controller image's base (tests/image)
#                   and the fresh system the README's demo is checked on (.ci/fresh-root.sh)
#   docker-buildx   only where the docker CLI is >= 23 (trixie): BuildKit for `docker
#                   build --secret` (the 20.10 CLI of bookworm has it built in)
#   docker-registry a real OCI registry (Debian's distribution), started by tests/registry
#   apache2-utils   htpasswd, for the registry's basic-auth tests
#   nginx-light     a real nginx with gzip_static for the encodings test (tests/e2e)
#   apache2         a real Apache httpd serving Rails' precompiled assets as the Rails
#                   guide configures it, .gz labelled gzip (tests/layouts/test_layout_rails.py)
#   caddy, lighttpd two more production servers a new user might run: Caddy's
#                   precompressed file_server, lighttpd's error-handler-404 SPA fallback
#                   (tests/layouts/test_layout_caddy_lighttpd.py)
#   varnish         a real cache in front of an origin: the CDN that lost the previous
#                   release's files (tests/layouts/test_previous_release.py)
#   prometheus      for promtool: the alert rules, their unit tests, the dashboard's
#                   queries and the lint of a real /metrics scrape (tests/obs); the
#                   server it also ships is not used (its service may start: harmless)
#   chromium        a real browser, headless, that opens the HTML report (tests/html)
#   chromium-driver its WebDriver, which selenium drives
#   tinyproxy-bin   a real HTTP proxy (binary only, no service) with basic authentication:
#                   CONNECT tunnels and absolute-form requests (tests/fetch/test_fetch_tinyproxy.py)
# Nothing is started here and no image is pulled: there is no registry in CI.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(docker.io busybox-static iptables iproute2 mmdebstrap docker-registry apache2-utils
          nginx-light apache2 caddy lighttpd varnish prometheus chromium chromium-driver
          tinyproxy-bin)
missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    apt-get update
    # The tests start every server themselves, on loopback and random ports: the services
    # these packages would start (nginx, apache2, lighttpd, caddy and varnish all want
    # port 80 or 6081) are kept from starting while they install (policy-rc.d's 101:
    # "action forbidden"), so one port taken by another never fails the install.
    policy=/usr/sbin/policy-rc.d
    placed=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && placed=1
    fi
    status=0
    apt-get install -y --no-install-recommends "${missing[@]}" || status=$?
    [ "$placed" = 1 ] && rm -f "$policy"
    [ "$status" = 0 ] || exit "$status"
fi

# busybox-static replaces (conflicts with) the dynamic busybox package; its binary is
# /bin/busybox, copied into the images, where no libc exists.
if [ ! -x /bin/busybox ]; then
    echo "docker.sh: /bin/busybox missing after installing busybox-static" >&2
    exit 1
fi
command -v dockerd >/dev/null

# BuildKit for the image test: the CLI's own (< 23) or the buildx plugin.
cli_major=$(/usr/bin/docker --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')
if [ "${cli_major:-0}" -ge 23 ] && ! /usr/bin/docker buildx version >/dev/null 2>&1; then
    if ! apt-cache show docker-buildx >/dev/null 2>&1; then apt-get update; fi
    apt-get install -y --no-install-recommends docker-buildx
fi
command -v mmdebstrap >/dev/null
command -v promtool >/dev/null
echo "docker.sh: $(dockerd --version); busybox-static $(dpkg-query -W -f='${Version}' busybox-static)"
