# vllm-scaler controller image (BuildKit, the default builder of Docker 23 and later).
#   docker build -t vllm-scaler .
#   docker run --rm vllm-scaler --help
# With the cloud extras (a managed Prometheus' authentication: AWS SigV4, Google and Azure
# workload identity; botocore, google-auth and azure-identity, about 30 MB more), from their
# own lock; the release publishes it as the tag with the "-cloud" suffix:
#   docker build --build-arg LOCK=requirements-cloud.txt -t vllm-scaler:cloud .
#
# Reproducible: the base image is pinned by the digest of its multi-platform index, every
# dependency by the hashes in requirements.txt, and the build backend that builds the project's
# wheel by those in requirements-build.txt (scripts/lock.sh regenerates both from
# pyproject.toml; tests/deploy/test_image.py checks that they agree).
#
# The digest is python:3.11-slim-bookworm as published for Python 3.11.16 (built on
# 2026-08-25, Debian bookworm). To move to a newer build (Debian security fixes), read the
# tag's current index digest and replace it below:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# Stage 1: wheels of every locked dependency (downloaded and checked against the lock's
# hashes; --require-hashes also refuses anything the lock does not pin) and of the project,
# built with the locked setuptools (requirements-build.txt), installed over the one the base
# image bundles: that one is whatever CPython's ensurepip carries for the release (65.5 up to
# 3.11.13, 79.0.1 since 3.11.14; none from 3.12), and pyproject's license expression needs 77
# or later. The build stage is discarded, so this setuptools never reaches the image.
FROM ${PYTHON_IMAGE} AS build
# requirements.txt, or requirements-cloud.txt for the image with the cloud extras
ARG LOCK=requirements.txt
WORKDIR /src
COPY requirements.txt requirements-cloud.txt requirements-build.txt pyproject.toml README.md ./
COPY scaler ./scaler
RUN python -m pip install --no-cache-dir --require-hashes -r requirements-build.txt \
    && python -m pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r "${LOCK}" \
    && python -m pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

# Stage 2: the wheels are mounted for the install only, so none of them is left in a layer;
# pip check fails the build if the lock misses a dependency. No compiler, no build tool.
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="vllm-scaler" \
      org.opencontainers.image.description="Autoscaling controller for vLLM inference servers on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VLLM_SCALER_LOG_FORMAT=json \
    VLLM_SCALER_POLICY_FILE=/etc/vllm-scaler/policy.yaml
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-index --no-deps /wheels/*.whl \
    && python -m pip check \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin scaler
# Numeric user so that runAsNonRoot can verify it; nothing is written to the root filesystem.
# The controller's commands (run, recommend, check-policy) need nothing more; sim, bench,
# backtest and dashboards say which extra they need (pip install 'vllm-scaler[sim]', ...).
USER 65532:65532
EXPOSE 9100
ENTRYPOINT ["vllm-scaler"]
CMD ["run"]
