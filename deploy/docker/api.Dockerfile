# vessel-api: vesseld --role=api, a stateless API replica (no KVM, no root).
# The build context is a staged `make install` (deploy/docker/build.sh):
# the binaries the CMake install rules produce, on Debian 12's libraries.
FROM debian:bookworm-slim
# The shared libraries vesseld and vessel link (install_layout_check keeps
# this list complete) and the public suffix list the egress policy checks.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libarchive13 libboost-json1.81.0 libfmt9 libpqxx-6.4 libpsl5 libseccomp2 libspdlog1.10 libsqlite3-0 libssl3 \
      libstdc++6 libgcc-s1 zlib1g publicsuffix ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY usr/local/bin/vesseld usr/local/bin/vessel /usr/local/bin/
RUN groupadd --system --gid 10001 vessel \
 && useradd --system --uid 10001 --gid vessel --home-dir /var/lib/vessel --no-create-home vessel \
 && install -d -o vessel -g vessel -m 0700 /var/lib/vessel /var/cache/vessel
USER 10001:10001
ENV VESSEL_STATE_DIR=/var/lib/vessel VESSEL_CACHE_DIR=/var/cache/vessel
# API, data plane, E2B REST, E2B envd.
EXPOSE 8080 8081 3000 49983
ENTRYPOINT ["/usr/local/bin/vesseld"]
CMD ["--role=api"]
