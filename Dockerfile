# syntax=docker/dockerfile:1
# Slowave MemoryService image (hybrid retrieval with the static embedding model; SQLite in the /data volume by default, PostgreSQL
# through SLOWAVE_DATABASE_URL).
#
#   docker build -t slowave .
#   docker run -d -p 50051:50051 -p 9464:9464 -v slowave-data:/data \
#       -e SLOWAVE_API_KEYS="team-a sha256:<hex>" slowave
#   docker stop -t 30 <container>      # the server drains for up to 20 s on SIGTERM
#
# The server listens on 0.0.0.0 here, and it refuses to serve a non-loopback address to anyone who
# can reach it: configure API keys (SLOWAVE_API_KEYS or a mounted SLOWAVE_API_KEYS_FILE; mint them
# with `slowave-admin keys mint`) or client certificates (SLOWAVE_TLS_*), or, when something in front
# of the container already restricts who reaches it (a mesh with mTLS, a private network), opt out
# explicitly with -e SLOWAVE_ALLOW_INSECURE_BIND=1. The image does not set that opt-out: a
# published port with no authentication would expose every tenant's memory. Health checks need no
# key, so the HEALTHCHECK below and Kubernetes' gRPC probes work either way (they do not speak TLS:
# with SLOWAVE_TLS_* set, override the HEALTHCHECK with `slowave --tls-ca … health`).

# ---------------------------------------------------------------------------------------- build
# Builds the slowave wheel (the hatch build hook generates the protobuf stubs from protos/) and a
# wheel of every runtime dependency, so the runtime stage installs from these files only.
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protos/ protos/
COPY server/ server/
COPY clients/python/ clients/python/
RUN pip wheel --wheel-dir /wheels .

# -------------------------------------------------------------------------------------- runtime
FROM python:3.11-slim AS runtime
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SLOWAVE_LISTEN_ADDR=0.0.0.0:50051 \
    SLOWAVE_METRICS_ADDR=0.0.0.0:9464 \
    SLOWAVE_DATA_DIR=/data \
    SLOWAVE_LOG_FORMAT=json \
    SLOWAVE_TARGET=127.0.0.1:50051
RUN groupadd --system --gid 10001 slowave \
 && useradd --system --uid 10001 --gid slowave --home-dir /data --no-create-home --shell /usr/sbin/nologin slowave \
 && install -d -o slowave -g slowave -m 0750 /data
# Only the wheels: no source tree, no compiler, no build tooling in the image (bind mount: the
# wheel files themselves never become a layer).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --no-index --find-links=/wheels slowave
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# gRPC (MemoryService, health, reflection) and Prometheus /metrics
EXPOSE 50051 9464
# gRPC health protocol: exit 0 iff the MemoryService is SERVING (NOT_SERVING while draining).
HEALTHCHECK --interval=15s --timeout=6s --start-period=30s --retries=3 \
    CMD ["slowave", "health", "--service", "slowave.v1.MemoryService"]
# Exec form: SIGTERM reaches the server itself, which drains (health NOT_SERVING, in-flight calls
# finish) and exits 0. `docker run … slowave slowave-admin migrate` runs an admin command instead.
CMD ["slowave-server"]
