# Image of the kubeflow-deadline-sweeper CLI, run by the Helm chart in chart/ as a CronJob.
#
# Two stages on one base: "build" turns the package into a wheel inside a virtual
# environment; "runtime" receives only that environment. The dependencies are installed
# before the code is copied, so editing sweeper/ does not re-download them.
#
# BASE_IMAGE:BASE_TAG defaults to the public Python image pinned by tag and by the digest of its
# multi-architecture index: that default is what a release builds. Where that image cannot be
# pulled, scripts/build-image builds an equivalent base from Debian's packages and passes it
# here (--build-arg BASE_IMAGE=... BASE_TAG=...): Python 3.11 at /usr/local/bin/python, pip in
# the build stage.
# A base without pip or a shell serves the runtime stage: its one step needs neither.
# The reference is split into repository and tag (with the digest), so that every FROM line
# names a tag that scanners can check.
ARG BASE_IMAGE=docker.io/library/python
ARG BASE_TAG=3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
ARG BUILD_BASE_IMAGE=${BASE_IMAGE}
ARG BUILD_BASE_TAG=${BASE_TAG}

FROM ${BUILD_BASE_IMAGE}:${BUILD_BASE_TAG} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# A venv without pip or setuptools: the base's pip installs into it, so no installer is
# copied into the runtime stage.
RUN python -m venv --without-pip /opt/venv

# Dependencies first, from the lock alone (cached until it changes): requirements.txt pins every
# package at one version with the hashes of its files (scripts/lock refreshes it from
# pyproject.toml's ranges). pip refuses a file whose hash differs, and --no-deps anything the
# lock does not name, so two builds of one commit install the same packages or fail.
COPY requirements.txt ./
RUN pip --python /opt/venv/bin/python install --require-hashes --no-deps --only-binary :all: \
    -r requirements.txt

# Then the code: build the wheel and install it without touching the dependencies again.
COPY pyproject.toml README.md ./
COPY sweeper ./sweeper
RUN pip wheel --no-deps --wheel-dir /tmp/dist . \
    && pip --python /opt/venv/bin/python install --no-deps /tmp/dist/*.whl \
    && /opt/venv/bin/sweeper --version

FROM ${BASE_IMAGE}:${BASE_TAG} AS runtime
ARG BASE_IMAGE
ARG BASE_TAG
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kubeflow-deadline-sweeper" \
      org.opencontainers.image.description="Makes Kubeflow training jobs past their deadline give their GPUs back" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper" \
      org.opencontainers.image.url="https://github.com/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper" \
      org.opencontainers.image.base.name="${BASE_IMAGE}:${BASE_TAG}"

# Nothing installs packages at run time: remove the base image's installers, if it has any.
# Exec form and Python, not a shell: a lean base may have neither a shell nor pip.
RUN ["python", "-c", "import importlib.util as u, subprocess as s, sys; u.find_spec('pip') and s.run([sys.executable, '-m', 'pip', 'uninstall', '--yes', '--no-cache-dir', 'pip', 'setuptools', 'wheel'], check=True)"]

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
