FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap libpango-1.0-0 libpangoft2-1.0-0 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir -e . gunicorn
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
