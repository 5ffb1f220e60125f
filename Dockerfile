# The plangate worker image: `pip install .` and nothing more. No development servers (the
# extra `plangate[embedded]`), no test tools (`plangate[dev]`); the build context holds only
# what the install needs (.dockerignore). docker-compose.yml runs it as `plangate worker` and,
# once, as `plangate setup`.
FROM python:3.11-slim-bookworm AS build
RUN python -m venv /opt/plangate
COPY . /src
RUN /opt/plangate/bin/pip install --no-cache-dir --disable-pip-version-check /src

FROM python:3.11-slim-bookworm
# an unprivileged user; its work directory (PLANGATE_WORKDIR) is the only place it writes
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/plangate plangate \
    && mkdir -p /var/lib/plangate/work && chown -R plangate:plangate /var/lib/plangate
COPY --from=build /opt/plangate /opt/plangate
ENV PATH=/opt/plangate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PLANGATE_WORKDIR=/var/lib/plangate/work
USER plangate
WORKDIR /home/plangate
CMD ["plangate", "worker"]
