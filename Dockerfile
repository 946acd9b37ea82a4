# Image of the kubeflow-deadline-sweeper CLI, run by the Helm chart in chart/ as a CronJob.
#
# Two stages on one pinned base: "build" turns the package into a wheel inside a virtual
# environment; "runtime" receives only that environment. The dependencies are installed
# before the code is copied, so editing sweeper/ does not re-download them.
#
# The base is pinned by tag and by the digest of its multi-architecture index, written out in
# both FROM lines (not an ARG, which a build could override); move both together.
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# A venv without pip or setuptools: the base's pip installs into it, so no installer is
# copied into the runtime stage.
RUN python -m venv --without-pip /opt/venv

# Dependencies first, read from pyproject.toml alone (cached until it changes).
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > /tmp/requirements.txt \
    && pip --python /opt/venv/bin/python install -r /tmp/requirements.txt

# Then the code: build the wheel and install it without touching the dependencies again.
COPY README.md ./
COPY sweeper ./sweeper
RUN pip wheel --no-deps --wheel-dir /tmp/dist . \
    && pip --python /opt/venv/bin/python install --no-deps /tmp/dist/*.whl \
    && /opt/venv/bin/sweeper --version

FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kubeflow-deadline-sweeper" \
      org.opencontainers.image.description="Enforces activeDeadlineSeconds on Kubeflow Training Operator v1 jobs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper" \
      org.opencontainers.image.url="https://github.com/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"

# Nothing installs packages at run time: remove the base image's installers.
RUN python -m pip uninstall --yes --no-cache-dir pip setuptools wheel

COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Numeric, so that Kubernetes can verify runAsNonRoot; 65532 is the conventional "nonroot".
USER 65532:65532
# A one-shot CronJob: Kubernetes tracks it by exit code and activeDeadlineSeconds, not a probe.
HEALTHCHECK NONE
ENTRYPOINT ["sweeper"]
# Without arguments the image only reports: nothing is written until it is told to.
CMD ["--dry-run"]
