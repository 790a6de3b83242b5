#!/usr/bin/env bash
# Builds the Osprey runtime image without a Docker engine or a registry: a bookworm root made from Debian packages
# alone (debootstrap), the host-built binary and the default repository copied in, imported by podman with the
# same entrypoint, user, environment and healthcheck as Deploy/Dockerfile.
#
#   Deploy/container/build-image.sh [TAG]        (default osprey:0.1.0; needs root, debootstrap and podman)
#
# The binary is `swift build -c release --product osprey --static-swift-stdlib` (built here), so the root needs only
# the C libraries Osprey links.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=${1:-osprey:0.1.0}
OUT=Deploy/out
ROOTFS=$OUT/rootfs
RUNTIME_PACKAGES=libuv1,libhttp-parser2.9,libnghttp2-14,libopenblas0-pthread,libpng16-16,libturbojpeg0,libstdc++6

for tool in debootstrap podman; do
    command -v "$tool" >/dev/null || .ci/apt-ensure "$tool"
done
# Incremental: relinks only when something changed since the last static build.
swift build -c release --product osprey --static-swift-stdlib >/dev/null
binary="$(swift build -c release --show-bin-path)/osprey"

# The root is cached between runs; delete Deploy/out/rootfs to rebuild it from the archive.
if [ ! -x "$ROOTFS/usr/bin/env" ]; then
    rm -rf "$ROOTFS.partial"
    debootstrap --variant=minbase --include="$RUNTIME_PACKAGES" bookworm "$ROOTFS.partial" http://deb.debian.org/debian >/dev/null
    # What a runtime image does not need: package caches, lists, docs.
    rm -rf "$ROOTFS.partial"/var/cache/apt/archives/*.deb "$ROOTFS.partial"/var/lib/apt/lists/* \
           "$ROOTFS.partial"/usr/share/doc/* "$ROOTFS.partial"/usr/share/man/*
    mv "$ROOTFS.partial" "$ROOTFS"
fi
# A numeric user without a login: runAsNonRoot can verify it.
grep -q '^osprey:' "$ROOTFS/etc/passwd" || {
    echo 'osprey:x:10001:10001:osprey:/nonexistent:/usr/sbin/nologin' >> "$ROOTFS/etc/passwd"
    echo 'osprey:x:10001:' >> "$ROOTFS/etc/group"
}
install -D -s -m 0755 "$binary" "$ROOTFS/usr/local/bin/osprey"
rm -rf "$ROOTFS/models" && cp -r models "$ROOTFS/models" && chown -R 10001:10001 "$ROOTFS/models"

# The Dockerfile's runtime settings, as podman import --change instructions.
tar -C "$ROOTFS" -c . | podman import \
    --change 'ENTRYPOINT ["/usr/local/bin/osprey", "serve"]' \
    --change 'USER 10001:10001' \
    --change 'ENV OSPREY_HOST=0.0.0.0' --change 'ENV OSPREY_PORT=8080' --change 'ENV OSPREY_MODEL_REPOSITORY=/models' \
    --change 'EXPOSE 8080' \
    --change 'LABEL org.opencontainers.image.title=osprey' \
    --change 'STOPSIGNAL SIGTERM' \
    - "$TAG" >/dev/null
echo "built $TAG ($(du -sh "$ROOTFS" | cut -f1) root)"
