# One image for the API and the Celery worker and beat (docs/design.md §8).
#   docker build -t benchwatch .                          # API, beat, CPU-free workers
#   docker build --build-arg EXTRAS=worker -t benchwatch-worker .   # + torch for benchmark workers
FROM python:3.11-slim

ARG EXTRAS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    XDG_DATA_HOME=/var/lib/benchwatch

WORKDIR /srv/benchwatch

# Dependencies first, in their own layer: it is rebuilt only when pyproject.toml or the pins
# change. The empty packages stand in for the code; the editable install maps the package
# names to /srv/benchwatch, so the code copied below is what runs, and app/core/migrate.py
# finds alembic.ini and migrations/ beside it (ROOT = /srv/benchwatch).
COPY pyproject.toml constraints.txt README.md ./
COPY client/pyproject.toml client/README.md client/
RUN mkdir app workers client/benchwatch_client \
    && touch app/__init__.py workers/__init__.py client/benchwatch_client/__init__.py \
    && pip install -c constraints.txt -e ./client -e ".${EXTRAS:+[$EXTRAS]}"

COPY . .

# Unprivileged at run time. The embedded default (no BENCHWATCH_DATABASE_URL) keeps its
# SQLite file under $XDG_DATA_HOME: mount a volume at /var/lib/benchwatch to keep it.
RUN useradd --system --create-home --uid 10001 benchwatch \
    && mkdir -p /var/lib/benchwatch \
    && chown benchwatch:benchwatch /var/lib/benchwatch
USER benchwatch

EXPOSE 8000
CMD ["benchwatch", "serve", "--host", "0.0.0.0"]
