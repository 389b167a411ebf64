FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap libpango-1.0-0 libpangoft2-1.0-0 && rm -rf /var/lib/apt/lists/*
# Runs as an unprivileged user (the uid docker-compose.yml names): generated code must never
# share a uid with root. bubblewrap then needs unprivileged user namespaces in the container
# (see docker-compose.yml's worker and the README's "The code sandbox"); without them every
# evaluation reports sandbox_unavailable.
RUN useradd --create-home --uid 10001 --user-group tierwatch
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir -e . gunicorn && mkdir -p /app/var && chown tierwatch:tierwatch /app/var
USER tierwatch
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
