"""Settings, read from the environment through ``monitor.env``.

With no environment at all this is the embedded setup of ``./run demo``: SQLite under
``var/`` and kombu's filesystem transport as the Celery broker, so nothing needs a server.
``DATABASE_URL`` and ``REDIS_URL`` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from monitor.env import env_bool, env_float, env_int, env_list, env_pair, env_str, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("TIERWATCH_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("TIERWATCH_DEBUG", False)
# TIERWATCH_SECRET_KEY, or else a random key made once and kept in var/ (monitor.env).
SECRET_KEY = secret_key("TIERWATCH_SECRET_KEY", VAR_DIR / "secret_key", debug=DEBUG)
ALLOWED_HOSTS = env_list("TIERWATCH_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("TIERWATCH_CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("TIERWATCH_SITE_URL", "http://127.0.0.1:8000")

# HTTPS behind a proxy: off by default (the embedded demo is plain http on 127.0.0.1); the
# README's production block turns them on, which makes `check --deploy` clean.
SESSION_COOKIE_SECURE = env_bool("TIERWATCH_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("TIERWATCH_CSRF_COOKIE_SECURE", False)
SECURE_SSL_REDIRECT = env_bool("TIERWATCH_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("TIERWATCH_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TIERWATCH_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("TIERWATCH_SECURE_HSTS_PRELOAD", False)
# e.g. "HTTP_X_FORWARDED_PROTO,https": only behind a proxy that sets that header itself
SECURE_PROXY_SSL_HEADER = env_pair("TIERWATCH_SECURE_PROXY_SSL_HEADER")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "template_partials",
    "django_htmx",
    "django_celery_beat",
    "ninja",  # serves its Swagger UI from static/, not a CDN
    "axes",
    "monitor",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "monitor.web.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# monitor.web.csp: scripts only from this site; inline styles for plotly and htmx
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

ROOT_URLCONF = "monitor.urls"
WSGI_APPLICATION = "monitor.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_SQLITE_URL = f"sqlite:///{VAR_DIR / 'tierwatch.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(env_str("DATABASE_URL", _SQLITE_URL), conn_max_age=60)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + IMMEDIATE: the worker writes samples while the web process reads pages.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory: a Celery worker started by the tests must see the test database.
    # One file per test session (pid), so concurrent sessions never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
# Login throttling (django-axes): after this many failed logins for one username from one
# client address, that username is locked out from that address for the cool-off time, also
# for the right password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("TIERWATCH_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = env_float("TIERWATCH_LOGIN_COOLOFF_HOURS", 1.0)
AXES_RESET_ON_SUCCESS = True
# Behind a proxy: the client's address from the proxy's header, trusted only when the request
# comes from one of TIERWATCH_TRUSTED_PROXIES (addresses or CIDR ranges, e.g.
# "127.0.0.1,10.0.0.0/8"); a lockout is of that address and the username together, so one
# user's wrong passwords do not lock out the others behind the same proxy (monitor.web.client_ip).
TRUSTED_PROXIES = env_list("TIERWATCH_TRUSTED_PROXIES", [])
CLIENT_IP_HEADER = env_str("TIERWATCH_CLIENT_IP_HEADER", "HTTP_X_FORWARDED_FOR")
AXES_CLIENT_IP_CALLABLE = "monitor.web.client_ip.client_ip"
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"]]
AXES_VERBOSE = False
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns on every request if it is missing
# Serve straight from static/ without a collectstatic step, so `./run demo` needs none.
WHITENOISE_USE_FINDERS = True

# Celery: broker from REDIS_URL, else the serverless filesystem transport of kombu.
REDIS_URL = env_str("REDIS_URL", "")
_BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
else:
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
    if CELERY_BROKER_URL == "filesystem://":
        for sub in ("queue", "processed", "control"):
            (_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
        CELERY_BROKER_TRANSPORT_OPTIONS = {
            "data_folder_in": str(_BROKER_DIR / "queue"),
            "data_folder_out": str(_BROKER_DIR / "queue"),
            "processed_folder": str(_BROKER_DIR / "processed"),
            "store_processed": False,
            "control_folder": str(_BROKER_DIR / "control"),
            # kombu polls the folders every 1 s by default: a worker ping then took ~2 s and
            # /health over its 1 s promise; at 0.1 s it answers in ~0.1-0.2 s
            # (docs/benchmarks.md, "/health"), for a directory listing ten times a second
            "polling_interval": 0.1,
        }
# Page figures and the speed page's bootstrap (monitor.derived.page_cache): shared by the web and
# worker processes, so a run's new summary reaches every page process: Redis with REDIS_URL,
# else files under VAR_DIR (the demo's SQLite setup; locmem would be per process).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "tw",
        "TIMEOUT": 7 * 24 * 3600,
    }
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / "cache"),
        "TIMEOUT": 7 * 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 2000},
    }
}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The watchdog (docs/reliability.md); DatabaseScheduler copies these entries into its table.
# Alert reminders and escalations are checked every 5 minutes (the finest step a rule's
# re-notify hours or escalation minutes need); the page cache is refilled every 5 minutes.
CELERY_BEAT_SCHEDULE = {
    "watchdog": {"task": "monitor.tasks.watchdog_task", "schedule": 60.0},
    "alert-sweep": {"task": "monitor.tasks.alert_sweep_task", "schedule": 300.0},
    "warm-pages": {"task": "monitor.tasks.warm_pages_task", "schedule": 300.0},
}
TIERWATCH_HEARTBEAT_S = env_float("TIERWATCH_HEARTBEAT_S", 30.0)  # a running run beats this often
TIERWATCH_STALE_AFTER_S = env_float("TIERWATCH_STALE_AFTER_S", 300.0)  # silent this long: lost
TIERWATCH_QUEUED_STALE_S = env_float("TIERWATCH_QUEUED_STALE_S", 3600.0)  # never started: lost
# still queued this long after its task was sent: sent again (monitor.runs.watchdog.resend_lost)
TIERWATCH_RESEND_AFTER_S = env_float("TIERWATCH_RESEND_AFTER_S", 600.0)
TIERWATCH_RUN_MAX_S = env_float("TIERWATCH_RUN_MAX_S", 3600.0)  # execute_run_task's time_limit
TIERWATCH_OVERDUE_GRACE_S = env_float("TIERWATCH_OVERDUE_GRACE_S", 900.0)  # beyond the interval
TIERWATCH_DB_RETRY_S = env_float("TIERWATCH_DB_RETRY_S", 60.0)  # a sample save rides out a restart
# past the retry, measured samples wait in memory this long for the database (then the run
# fails as "database unavailable")
TIERWATCH_DB_OUTAGE_S = env_float("TIERWATCH_DB_OUTAGE_S", 600.0)
# Queues by kind (monitor.runs.routing): probes, audits, reports; workers choose theirs with -Q.
CELERY_TASK_ROUTES = ("monitor.runs.routing.route_task",)
# Requests in flight per vendor (API host) across all workers, with REDIS_URL
# (monitor.runs.ratelimit).
TIERWATCH_VENDOR_CONCURRENCY = env_int("TIERWATCH_VENDOR_CONCURRENCY", 16)
# Concurrent streams per worker process, all its runs together (evals.plan.StreamBudget): up to
# 100 the TTFT P99 error stays near the socket floor; at 200 it does not (docs/benchmarks.md).
TIERWATCH_MAX_STREAMS = env_int("TIERWATCH_MAX_STREAMS", 100)

# Mail: Django's SMTP backend; EMAIL_BACKEND may point to the file backend for the demo.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_FILE_PATH = str(VAR_DIR / "mail")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tierwatch@localhost")

# Measurement policy (docs/measures.md): no percentile below MIN_N samples.
TIERWATCH_MIN_N = env_int("TIERWATCH_MIN_N", 5)
# PagerDuty Events API v2; overridable so tests post to a local receiver
TIERWATCH_PAGERDUTY_URL = env_str(
    "TIERWATCH_PAGERDUTY_URL", "https://events.pagerduty.com/v2/enqueue"
)
# the SLA report's availability SLO (error budget = 1 - target)
TIERWATCH_SLO_AVAILABILITY = env_float("TIERWATCH_SLO_AVAILABILITY", 0.99)
# the largest capability drop (points) a "route to the fast tier" advice accepts
TIERWATCH_ROUTE_TOLERANCE_POINTS = env_float("TIERWATCH_ROUTE_TOLERANCE_POINTS", 10.0)
TIERWATCH_HTTP_TIMEOUT_S = env_float("TIERWATCH_HTTP_TIMEOUT_S", 120.0)
# Bearer token Prometheus sends to /metrics; unset, /metrics answers 404.
TIERWATCH_METRICS_TOKEN = env_str("TIERWATCH_METRICS_TOKEN", "")
# Runs one API token may start (``POST /api/pairs/{name}/runs``): "N/s|min|h|d"; past it 429
TIERWATCH_API_RUN_RATE = env_str("TIERWATCH_API_RUN_RATE", "10/min")
# /api/docs and /api/openapi.json: the API's shape, no data; off: a token or a session needed
TIERWATCH_API_DOCS_PUBLIC = env_bool("TIERWATCH_API_DOCS_PUBLIC", True)
# Retention (monitor.derived.retention): sample payloads kept this many days; the samples of each
# pair's newest K audits kept whole.
TIERWATCH_RETENTION_DAYS = env_int("TIERWATCH_RETENTION_DAYS", 30)
TIERWATCH_RETENTION_KEEP_AUDITS = env_int("TIERWATCH_RETENTION_KEEP_AUDITS", 4)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("TIERWATCH_LOG_LEVEL", "INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "weasyprint": {"level": "WARNING"},
        "fontTools": {"level": "WARNING"},
        # Apprise's messages quote the URLs it was given, and those hold tokens
        "apprise": {"level": "CRITICAL"},
    },
}
