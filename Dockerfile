# One image runs any Sidekick service: the container's args pick it, e.g.
#   docker run IMAGE run gateway      docker run IMAGE run workers --kinds search
# Build: docker build -t sidekick .   (see docs/operations.md)

# --- build: install the package and its dependencies into a self-contained virtualenv
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/sidekick
WORKDIR /src
# Metadata first, so the dependency layer is only rebuilt when pyproject.toml changes.
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY services ./services
RUN /opt/sidekick/bin/pip install --no-cache-dir . \
    && /opt/sidekick/bin/python -m compileall -q /opt/sidekick

# --- runtime: the virtualenv only; no compilers, no pip cache, no source tree
FROM python:3.11-slim AS runtime

LABEL org.opencontainers.image.title="sidekick" \
      org.opencontainers.image.description="Sidekick: one image, any service (sidekick run <service>)" \
      org.opencontainers.image.licenses="MIT"

# A fixed numeric uid/gid, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
RUN groupadd --system --gid 10001 sidekick \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
       --shell /usr/sbin/nologin sidekick

COPY --from=build /opt/sidekick /opt/sidekick

# The root filesystem may be read-only: no bytecode writes, HOME and temp files under /tmp.
ENV PATH=/opt/sidekick/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    SIDEKICK_GATEWAY_HOST=0.0.0.0 \
    SIDEKICK_OPS_HOST=0.0.0.0 \
    SIDEKICK_OPS_PORT=9000

WORKDIR /tmp
USER 10001:10001

# 8080: the gateway's HTTP/WebSocket port; 9000: /healthz, /readyz, /metrics of the others.
EXPOSE 8080 9000

ENTRYPOINT ["sidekick"]
CMD ["run", "gateway"]
