# One image runs any Sidekick service: the container's args pick it, e.g.
#   docker run IMAGE run gateway      docker run IMAGE run workers --kinds search
# Build: docker build -t sidekick .                       (the default target, `runtime`)
#        docker build --target browser -t sidekick-browser .   (adds Chromium for TOOLS workers)
# See docs/operations.md.

# --- build: install the package and its dependencies into a self-contained virtualenv
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/sidekick
WORKDIR /src
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY services ./services
RUN /opt/sidekick/bin/pip install --no-cache-dir . \
    && /opt/sidekick/bin/python -m compileall -q /opt/sidekick

# --- base: the virtualenv only; no compilers, no pip cache, no source tree
FROM python:3.11-slim AS base

LABEL org.opencontainers.image.title="sidekick" \
      org.opencontainers.image.description="Sidekick: one image, any service (sidekick run <service>)" \
      org.opencontainers.image.licenses="MIT"

# A fixed numeric uid/gid, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
RUN groupadd --system --gid 10001 sidekick \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
       --shell /usr/sbin/nologin sidekick

COPY --from=build /opt/sidekick /opt/sidekick

# The root filesystem may be read-only: no bytecode writes; HOME, temp files and the data dir
# (.sidekick: outbox, session files) under /tmp, which Kubernetes mounts as an emptyDir.
ENV PATH=/opt/sidekick/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    SIDEKICK_DATA_DIR=/tmp/.sidekick \
    SIDEKICK_GATEWAY_HOST=0.0.0.0 \
    SIDEKICK_OPS_HOST=0.0.0.0 \
    SIDEKICK_OPS_PORT=9000

WORKDIR /tmp
# 8080: the gateway's HTTP/WebSocket port; 9000: /healthz, /readyz, /metrics of the others.
EXPOSE 8080 9000
ENTRYPOINT ["sidekick"]
CMD ["run", "gateway"]

# --- browser: the same, plus Debian's Chromium for the TOOLS worker's browser tool
FROM base AS browser
# Debian's archive keeps only the current security release of a package, so a pinned version
# would break the build at the next update; the distribution release pins it instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-liberation \
    && rm -rf /var/lib/apt/lists/*
USER 10001:10001

# --- runtime (default): every service; the TOOLS worker's browser tool needs `browser`
FROM base AS runtime
USER 10001:10001
