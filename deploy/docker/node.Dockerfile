# vessel-node: vesseld --role=node with its egress gateway (vessel-gateway,
# which vesseld runs as a supervised child), QEMU, and the guest kernel and
# images. Runs privileged with the host's /dev/kvm (deploy/helm/vessel).
# The build context is a staged `make install` (deploy/docker/build.sh).
FROM debian:bookworm-slim
# The shared libraries of vesseld, vessel and vessel-gateway, and the
# programs vesseld runs: QEMU (with its microvm firmware), qemu-img for disk
# overlays, nft and ip for each sandbox's network, sysctl (install_layout_check
# keeps this list complete). ca-certificates: the gateway verifies upstreams.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libarchive13 libboost-json1.81.0 libcap-ng0 libfmt9 libfuse3-3 libpqxx-6.4 libpsl5 libseccomp2 libspdlog1.10 libsqlite3-0 libssl3 \
      libstdc++6 libgcc-s1 zlib1g publicsuffix ca-certificates \
      qemu-system-x86 qemu-utils nftables iproute2 procps \
 && rm -rf /var/lib/apt/lists/*
COPY usr/local/bin/ /usr/local/bin/
COPY usr/local/lib/vessel/ /usr/local/lib/vessel/
COPY usr/local/share/vessel/ /usr/local/share/vessel/
ENV VESSEL_KERNEL=/usr/local/share/vessel/kernel/vmlinux \
    VESSEL_MINIMAL_IMAGE=/usr/local/share/vessel/images/minimal.ext4 \
    VESSEL_DEBIAN_IMAGE=/usr/local/share/vessel/images/debian.ext4 \
    VESSEL_STATE_DIR=/var/lib/vessel \
    VESSEL_CACHE_DIR=/var/cache/vessel
# The node API.
EXPOSE 8091
# The entrypoint readies the container's cgroup for the VMs' (read it), then
# runs the command: the chart passes vesseld's, or vessel-templates'.
ENTRYPOINT ["/usr/local/lib/vessel/node-entrypoint"]
CMD ["/usr/local/bin/vesseld", "--role=node"]
