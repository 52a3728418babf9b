# vllm-scaler controller image.
#   docker build -t vllm-scaler .
#   docker run --rm vllm-scaler --help
# Stage 1 builds a wheel of the project and of every dependency; stage 2 installs only the
# wheels, so no compiler or build tool reaches the final image.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
RUN python -m pip install --no-cache-dir --upgrade pip
COPY pyproject.toml README.md ./
COPY scaler ./scaler
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="vllm-scaler" \
      org.opencontainers.image.description="Autoscaling controller for vLLM inference servers on Kubernetes"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VLLM_SCALER_LOG_FORMAT=json \
    VLLM_SCALER_POLICY_FILE=/etc/vllm-scaler/policy.yaml
COPY --from=build /wheels /tmp/wheels
RUN python -m pip install --no-cache-dir --no-index /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin scaler
# Numeric user so that runAsNonRoot can verify it; nothing is written to the root filesystem.
USER 65532:65532
EXPOSE 9100
ENTRYPOINT ["vllm-scaler"]
CMD ["run"]
