"""Django settings for gangweb.

Every deployment-specific value comes from an environment variable with a safe development default;
docs/configuration.md lists them all. Nothing here reads a file outside the repository except the state directory.
"""
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    """Read a boolean environment variable ("1", "true", "yes", "on" are true)."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    """Read a comma-separated environment variable into a list of stripped, non-empty items."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Where runtime state lives on a laptop: SQLite file, broker folders, local cluster. Never committed.
STATE_DIR = Path(os.environ.get("GANGWEB_STATE_DIR", BASE_DIR / "var"))

DEBUG = env_bool("DEBUG", False)
_DEV_SECRET = "dev-insecure-secret-key-change-me"  # noqa: S105 - refused below when DEBUG is off
SECRET_KEY = os.environ.get("SECRET_KEY", _DEV_SECRET)
TESTING = env_bool("GANGWEB_TESTING", False)
if SECRET_KEY == _DEV_SECRET and not (DEBUG or TESTING):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# Label value stamped on every object this gangweb creates, so two installs never touch each other's.
GANGWEB_INSTANCE = os.environ.get("GANGWEB_INSTANCE", "gangweb")
# A job Queued for longer than this shows as stuck on the overview (seconds).
GANGWEB_STUCK_AFTER_SECONDS = int(os.environ.get("GANGWEB_STUCK_AFTER_SECONDS", "900"))
# A backend's scheduler counts as seen when its Lease was renewed or it reported an Event this recently
# (scheduling/observe/presence.py; a leader renews every 2 s, the probe runs once a minute).
GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS = int(os.environ.get("GANGWEB_SCHEDULER_SEEN_WITHIN_SECONDS", "300"))
# A finished (Succeeded/Failed) job's Indexed Jobs and their pods stay this long after it finished, for inspection
# (`kubectl logs`), then are deleted (seconds; a template's `retentionSeconds` overrides it; reconcile/retention.py).
GANGWEB_FINISHED_RETENTION_SECONDS = int(os.environ.get("GANGWEB_FINISHED_RETENTION_SECONDS", "3600"))
# A queue's decayed usage (services/queues/decayed_usage.py): past use weighs half as much per this many seconds of
# age (KAI time-based fair share `usageDBConfig.usageParams.halfLifePeriod`; default 7 days).
GANGWEB_USAGE_HALF_LIFE_SECONDS = float(os.environ.get("GANGWEB_USAGE_HALF_LIFE_SECONDS", str(7 * 24 * 3600)))
# Clusters (names) whose scheduler orders sibling queues by decayed usage: KAI with time-based fair share on (its
# SchedulingShard's usageDBConfig), Kueue with admission fair sharing (ClusterQueue admissionScope). gangweb reads
# neither setting from the cluster, so the line order uses decayed usage only where this list says so
# (services/queues/usage_order.py).
GANGWEB_USAGE_ORDERED_CLUSTERS = env_list("GANGWEB_USAGE_ORDERED_CLUSTERS", "")
# GET /api/v1/jobs/<id>/logs/ (services/jobs/logs.py): at most this many bytes of a container's log per answer (the
# rest is cut and the answer says so), and a `follow` stream ends after this many seconds.
GANGWEB_LOG_MAX_BYTES = int(os.environ.get("GANGWEB_LOG_MAX_BYTES", str(1024 * 1024)))
GANGWEB_LOG_FOLLOW_SECONDS = float(os.environ.get("GANGWEB_LOG_FOLLOW_SECONDS", "300"))
# Finished jobs' rows (and their history) older than this many days are deleted by the hourly beat task
# scheduling.prune_job_history, at most PRUNE_PER_RUN a run (reconcile/row_retention.py). 0: kept for ever.
GANGWEB_JOB_HISTORY_DAYS = float(os.environ.get("GANGWEB_JOB_HISTORY_DAYS", "0"))
GANGWEB_JOB_HISTORY_PRUNE_PER_RUN = int(os.environ.get("GANGWEB_JOB_HISTORY_PRUNE_PER_RUN", "100000"))
# Periodic resync of every cluster (seconds); watches deliver changes in between.
GANGWEB_RESYNC_SECONDS = int(os.environ.get("GANGWEB_RESYNC_SECONDS", "30"))
# Singletons by election (scheduling/work/election.py): a watcher replica watches a cluster only under its lease, one
# beat sends under the install's; a dead holder is replaced within the lease's seconds plus one tick (5 s).
GANGWEB_WATCH_LEASE_SECONDS = float(os.environ.get("GANGWEB_WATCH_LEASE_SECONDS", "30"))
GANGWEB_WATCH_MAX_CLUSTERS = int(os.environ.get("GANGWEB_WATCH_MAX_CLUSTERS", "0"))  # per replica; 0: no limit
# Threads per watched cluster that write the dirty jobs' observations at once (PostgreSQL only: SQLite takes one
# writer at a time); their round trips and commits overlap (reconcile/cluster_watcher.py, bench/: watch churn).
GANGWEB_WATCH_OBSERVERS = int(os.environ.get("GANGWEB_WATCH_OBSERVERS", "4"))
GANGWEB_BEAT_LEASE_SECONDS = float(os.environ.get("GANGWEB_BEAT_LEASE_SECONDS", "30"))
# why_pending says no scheduler acts on a job's pods once they all exist this long with no word from any scheduler
# (observe.causes.silent_scheduler); seen at the first observation after that (the resync at the latest).
GANGWEB_SCHEDULER_SILENCE_SECONDS = float(os.environ.get("GANGWEB_SCHEDULER_SILENCE_SECONDS", "300"))
# A waiting job's Warning Events (why_pending.said: count, first/last seen) are read by a reconcile pass at most once
# per this many seconds per job (reconcile/waiting_events.py); 0 turns the reading off.
GANGWEB_WAITING_EVENTS_SECONDS = float(os.environ.get("GANGWEB_WAITING_EVENTS_SECONDS", "60"))
# A partial gang gangweb did not cause (pods bound below the job's minimum after someone edited the gang's minimum)
# is released this many seconds after its pods were bound: its bound pods are deleted so the gang waits whole again
# (reconcile/jobs/partial.py). Empty or "off" turns releasing off (the job still reads PartialGang).
_partial_grace = os.environ.get("GANGWEB_PARTIAL_GANG_GRACE_SECONDS", "30").strip().lower()
GANGWEB_PARTIAL_GANG_GRACE_SECONDS = None if _partial_grace in ("", "off", "none") else float(_partial_grace)
# A repair of a drifted gang object that something in the cluster keeps undoing (a mutating admission policy) is
# made again at once this many times in a row; after that gangweb waits GANGWEB_REPAIR_BACKOFF_SECONDS, doubling
# each time, at most GANGWEB_RESYNC_SECONDS, and says RepairNotHolding (reconcile/jobs/repairs.py).
GANGWEB_REPAIR_LIMIT = int(os.environ.get("GANGWEB_REPAIR_LIMIT", "3"))
GANGWEB_REPAIR_BACKOFF_SECONDS = int(os.environ.get("GANGWEB_REPAIR_BACKOFF_SECONDS", "1"))
# A periodic resync passes over at most this many jobs of a cluster, for at most this many seconds (below the task's
# soft time limit, scheduling.constants.RESYNC_SOFT_TIME_LIMIT); the next one goes on where it stopped.
GANGWEB_RESYNC_MAX_JOBS = int(os.environ.get("GANGWEB_RESYNC_MAX_JOBS", "2000"))
GANGWEB_RESYNC_MAX_SECONDS = float(os.environ.get("GANGWEB_RESYNC_MAX_SECONDS", "240"))
# Objects per page of every LIST gangweb sends (kube/objects.py: `limit` and `continue`): what one answer, and the
# resync's memory for it, holds at most.
GANGWEB_LIST_PAGE_SIZE = int(os.environ.get("GANGWEB_LIST_PAGE_SIZE", "500"))
# ... and leaves to their own queued task the jobs whose task was queued (a submit, a cancel, an edit:
# `GangJob.task_queued_at`) less than this long ago (seconds) and has not taken them yet; after it, the resync takes
# over a task lost with the broker. A job a task took and let go (gave up, or its worker died and its claim lapsed)
# is the resync's at once (reconcile/jobs/claims.py).
GANGWEB_RESYNC_GRACE_SECONDS = float(os.environ.get("GANGWEB_RESYNC_GRACE_SECONDS",
                                                    str(max(60, 2 * GANGWEB_RESYNC_SECONDS))))
# Placement and moves (issue 38; docs/queues.md, "Where a job runs"): a cluster not probed for
# GANGWEB_PLACEMENT_STALE_SECONDS is not chosen while another is known; one unreachable for
# GANGWEB_CLUSTER_LOST_SECONDS is lost: its waiting jobs gangweb placed move to another cluster.
GANGWEB_PLACEMENT_STALE_SECONDS = float(os.environ.get("GANGWEB_PLACEMENT_STALE_SECONDS", "300"))
GANGWEB_CLUSTER_LOST_SECONDS = float(os.environ.get("GANGWEB_CLUSTER_LOST_SECONDS", "600"))
# Passes of one bulk-reconcile batch run from this many threads per worker process, each with a database
# connection of its own while the batch runs (bench/: reconcile). 1 runs them one after the other.
GANGWEB_RECONCILE_THREADS = int(os.environ.get("GANGWEB_RECONCILE_THREADS", "4"))
# KAI queue sync: how often every cluster's Queues are put in line (seconds); usage samples are written when the
# numbers change and at least every GANGWEB_QUEUE_SAMPLE_SECONDS; samples older than the retention are dropped.
GANGWEB_QUEUE_SYNC_SECONDS = int(os.environ.get("GANGWEB_QUEUE_SYNC_SECONDS", "60"))
GANGWEB_QUEUE_SAMPLE_SECONDS = int(os.environ.get("GANGWEB_QUEUE_SAMPLE_SECONDS", "300"))
GANGWEB_QUEUE_USAGE_RETENTION_DAYS = int(os.environ.get("GANGWEB_QUEUE_USAGE_RETENTION_DAYS", "30"))
# Bearer token a Prometheus scrape of /metrics must send. Without one /metrics answers 401 (it lists every tenant's
# queues and job counts), unless the install opts out with GANGWEB_METRICS_PUBLIC=1 (`make run` does; tests too).
GANGWEB_METRICS_TOKEN = os.environ.get("GANGWEB_METRICS_TOKEN", "")
GANGWEB_METRICS_PUBLIC = env_bool("GANGWEB_METRICS_PUBLIC", TESTING)
# Long-poll waits (GET /api/v1/jobs/wait/): each web process reads the jobs its waiters wait on this often (s).
GANGWEB_WAIT_POLL_SECONDS = float(os.environ.get("GANGWEB_WAIT_POLL_SECONDS", "1.0"))
# Long-polls one user (all their tokens and sessions together) may hold at a time in one web process, and that the
# process holds in all; more answer 429 + Retry-After. A waiter holds a web thread (gthread: the chart runs 16 per
# process), so the process cap keeps the other threads for ordinary requests and health checks: keep it at most
# half of gunicorn's --threads (the chart sets it so). Issue 32 row 3.
GANGWEB_WAITS_PER_USER = int(os.environ.get("GANGWEB_WAITS_PER_USER", "4"))
GANGWEB_WAITS_PER_PROCESS = int(os.environ.get("GANGWEB_WAITS_PER_PROCESS", "8"))
# Active (unrevoked, unexpired) API tokens per user, and webhook subscriptions per user: more is 409 naming the cap.
GANGWEB_TOKENS_PER_USER = int(os.environ.get("GANGWEB_TOKENS_PER_USER", "20"))
GANGWEB_WEBHOOKS_PER_USER = int(os.environ.get("GANGWEB_WEBHOOKS_PER_USER", "25"))
# Webhooks (services/webhooks/subscriptions.py): how often new timeline entries become deliveries (s); the dashboard's
# address that job links in payloads start with; whether receivers may be loopback/private/link-local addresses.
GANGWEB_NOTIFY_SCAN_SECONDS = float(os.environ.get("GANGWEB_NOTIFY_SCAN_SECONDS", "5"))
GANGWEB_PUBLIC_URL = os.environ.get("GANGWEB_PUBLIC_URL", "http://127.0.0.1:8000")
# Off (default), 1 (every private range), or a comma-separated CIDR list
# (scheduling/security/addresses.AddressPolicy.parse). DEBUG (`make run`) allows loopback, like the cluster addresses: a
# receiver on the laptop works out of the box. Tests keep it off (they set it where they mean it).
GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES = os.environ.get(
    "GANGWEB_ALLOW_PRIVATE_WEBHOOK_ADDRESSES", "127.0.0.0/8,::1/128" if DEBUG and not TESTING else "")
# One delivery attempt's connect and read timeouts (s): a slower receiver is a failed attempt, retried with backoff.
GANGWEB_WEBHOOK_CONNECT_TIMEOUT_SECONDS = float(os.environ.get("GANGWEB_WEBHOOK_CONNECT_TIMEOUT_SECONDS", "3"))
GANGWEB_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("GANGWEB_WEBHOOK_TIMEOUT_SECONDS", "5"))
# The Celery queue of webhook work (the outbox scan and the deliveries), consumed by a worker of its own so that a
# slow or failing receiver never holds a slot of the worker that reconciles (which consumes CELERY_TASK_DEFAULT_QUEUE).
GANGWEB_WEBHOOK_QUEUE = "webhooks"
# Largest request body the API accepts (bytes); bulk submit of thousands of jobs fits well inside.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("GANGWEB_MAX_BODY_BYTES", str(8 * 1024 * 1024)))
# Largest template spec or job overrides (characters of compact JSON; YAML text too): services/templates/spec_limits.py.
GANGWEB_MAX_SPEC_BYTES = int(os.environ.get("GANGWEB_MAX_SPEC_BYTES", str(256 * 1024)))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "axes",
    "scheduling",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer kubelet probes before the host check and HTTPS redirect (gangweb/health.py).
    "gangweb.health.HealthMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "scheduling.middleware.AccessMemoMiddleware",
    "scheduling.middleware.DependencyUnavailableMiddleware",  # PostgreSQL/Redis down: 503 + Retry-After, not 500
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a locked-out login (request.axes_locked_out) into its 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "gangweb.urls"
WSGI_APPLICATION = "gangweb.wsgi.application"

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

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{STATE_DIR / 'gangweb.sqlite3'}"),
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        # A kept connection is checked (SELECT 1) before its first use in each request or task: after a PostgreSQL
        # restart the first request reconnects instead of failing on the dead connection.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"].endswith("postgresql") and env_bool("DATABASE_PREPARED_STATEMENTS", True):
    # Server-side binding (Django's psycopg 3 option: parameters travel apart from the SQL) and psycopg's own
    # prepare threshold (5, which Django sets to None, i.e. never, unless OPTIONS says otherwise): a statement that
    # ran 5 times on a connection is prepared, and PostgreSQL reuses its plan (a generic plan after 5 more runs).
    # Planning a single submit's queue lookup cost ~1.2 ms of the database's CPU per request (bench/README.md).
    # Turn it off (DATABASE_PREPARED_STATEMENTS=0) behind a pooler that cannot keep prepared statements per client,
    # e.g. PgBouncer in transaction mode before 1.21 or without `max_prepared_statements`.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, worker and beat share one SQLite file on a laptop: wait for locks rather than fail.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    # models.W040: the job_active_usage index (GangJob.Meta) INCLUDEs the requested totals so that PostgreSQL answers
    # the usage estimate from the index alone. SQLite has no INCLUDE and creates the same partial index on
    # queue_id without them, which still narrows the sum to one queue's active jobs: nothing to fix on a laptop.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
if TESTING and DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Threads in tests (the cluster watcher, live servers) need SQLite's real file locking, which waits up to the
    # timeout above; an in-memory shared-cache database fails at once with "database table is locked" instead.
    # One file per test process, in the temp directory, removed by Django when the run ends.
    import tempfile

    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"gangweb-test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
if TESTING:  # hashing cost is not what tests measure
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "scheduling:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# In development and tests serve from the finders; production runs collectstatic (see docker/).
WHITENOISE_USE_FINDERS = DEBUG or TESTING
WHITENOISE_AUTOREFRESH = DEBUG or TESTING

REST_FRAMEWORK = {
    # Bearer tokens first: its WWW-Authenticate header makes DRF answer 401 (not 403) without credentials.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "scheduling.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "scheduling.api.authentication.ThrottledBasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only, within DATA_UPLOAD_MAX_MEMORY_SIZE (DRF's own parser reads past it): a form or multipart body is
    # 415 before anything is read, so no file part is ever spooled to disk (issue 15, L3). The dashboard's forms are
    # Django views with Django's own limits, not the API.
    "DEFAULT_PARSER_CLASSES": ["scheduling.api.parsers.BoundedJSONParser"],
    "DEFAULT_FILTER_BACKENDS": [
        "scheduling.api.filters.ValidatingFilterBackend",  # every bad query parameter in one 400
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "scheduling.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "scheduling.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gangweb API",
    "DESCRIPTION": "Gang-scheduled jobs, runtime templates, KAI queue policies and clusters.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from drf-spectacular-sidecar's static files: same origin, so the strict CSP holds, offline too.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Security ------------------------------------------------------------------------------------------------
# Fernet keys for credentials at rest (scheduling/security/encryption.py): comma-separated, the first encrypts. Required
# when DEBUG is off; dev and tests derive one from SECRET_KEY. Rotate with `manage.py rotate_encryption_key`.
GANGWEB_ENCRYPTION_KEYS = env_list("GANGWEB_ENCRYPTION_KEYS", "")
if not GANGWEB_ENCRYPTION_KEYS and not (DEBUG or TESTING):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("GANGWEB_ENCRYPTION_KEYS must be set when DEBUG is off")
# Cluster API servers on non-public addresses (scheduling/security/addresses.py, docs/security.md): "" refuses them, "1"
# allows every private range, or a CIDR list ("10.0.0.0/8"). Metadata endpoints stay refused. Dev and tests allow
# loopback only: `make run`'s local cluster and the test control plane listen on 127.0.0.1.
GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES = os.environ.get(
    "GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES", "127.0.0.0/8,::1/128" if (DEBUG or TESTING) else "")
# Members of this group are platform admins, like superusers and staff (scheduling/services/access/roles.py).
GANGWEB_PLATFORM_ADMIN_GROUP = os.environ.get("GANGWEB_PLATFORM_ADMIN_GROUP", "platform-admins")
# Namespaces no queue may run jobs in, besides Kubernetes' own kube-*: gangweb's own namespace in a managed cluster
# (when it runs in one) and any others of the install (docs/security.md "Pod-spec policy").
GANGWEB_NAMESPACE = os.environ.get("GANGWEB_NAMESPACE", "")
GANGWEB_RESERVED_NAMESPACES = env_list("GANGWEB_RESERVED_NAMESPACES", "")
# API tokens: default and longest lifetime (days).
GANGWEB_TOKEN_DEFAULT_DAYS = int(os.environ.get("GANGWEB_TOKEN_DEFAULT_DAYS", "90"))
GANGWEB_TOKEN_MAX_DAYS = int(os.environ.get("GANGWEB_TOKEN_MAX_DAYS", "366"))
# Submit rate limits ("<n>/second|minute|hour|day"; "off" disables). A bulk submit is one request. Off in tests.
def env_rate(name: str, default: str) -> str | None:
    """A DRF rate from the environment; "off" (the default under GANGWEB_TESTING) means no limit."""
    value = os.environ.get(name, "off" if TESTING else default).strip()
    return None if value.lower() in {"off", "none", ""} else value


GANGWEB_SUBMIT_RATE_PER_TOKEN = env_rate("GANGWEB_SUBMIT_RATE_PER_TOKEN", "120/minute")
GANGWEB_SUBMIT_RATE_PER_USER = env_rate("GANGWEB_SUBMIT_RATE_PER_USER", "300/minute")
# Jobs that one user's bulk submits may create per minute (scheduling/api/throttling.BulkJobsQuota); "off" or 0
# disables it. Off in tests.
_bulk_quota = os.environ.get("GANGWEB_BULK_JOBS_PER_MINUTE", "off" if TESTING else "20000").strip().lower()
GANGWEB_BULK_JOBS_PER_MINUTE = None if _bulk_quota in {"off", "none", "", "0"} else int(_bulk_quota)
# Throttle counters must be shared by all web workers: Redis when configured, else this process's memory.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if os.environ.get("REDIS_URL") and not TESTING:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": os.environ["REDIS_URL"], "KEY_PREFIX": "gangweb"}}

# Login throttling (django-axes, issue 15 L7): after GANGWEB_LOGIN_FAILURE_LIMIT failed passwords for one username
# from one IP address, that pair is locked out for GANGWEB_LOGIN_COOLOFF_SECONDS: the login form answers 429 and
# Basic auth 429 with Retry-After (scheduling/api/authentication.py), before any password is hashed. Attempts
# are rows in the database (shared by every web process; platform admins see and clear them in /admin/); a
# successful login clears the pair's count. Off under testing (GANGWEB_LOGIN_THROTTLE=1 turns it on).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env_bool("GANGWEB_LOGIN_THROTTLE", not TESTING)
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = int(os.environ.get("GANGWEB_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(seconds=int(os.environ.get("GANGWEB_LOGIN_COOLOFF_SECONDS", "900")))
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
# The client address the lockout is keyed by (issue 32 row 6): REMOTE_ADDR, or, for a request that came through one
# of the install's own proxies (GANGWEB_TRUSTED_PROXIES: comma-separated CIDRs, e.g. the ingress controller's pod
# network), the nearest X-Forwarded-For entry that is not such a proxy. Empty (default): X-Forwarded-For is never
# believed. scheduling/security/client_address.py; docs/security.md "Web". A locked-out pair recovers after the
# cool-off, or at once with `manage.py axes_reset_username <name>` / `axes_reset_ip <address>` or in /admin/ (Axes).
GANGWEB_TRUSTED_PROXIES = os.environ.get("GANGWEB_TRUSTED_PROXIES", "")
AXES_CLIENT_IP_CALLABLE = "scheduling.security.client_address.client_ip"
AXES_VERBOSE = False

# Behind TLS in production: SECURE_COOKIES=1 marks cookies Secure and turns on HSTS.
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = int(os.environ.get("SESSION_COOKIE_AGE", str(12 * 3600)))
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000" if SECURE_COOKIES else "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
if env_bool("SECURE_PROXY_SSL_HEADER", False):  # only behind a proxy that sets X-Forwarded-Proto itself
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp 4): scripts and styles only from our own static files (htmx included), no
# inline script, no framing. The API docs page relaxes it for the Swagger UI (gangweb/urls.py).
from csp.constants import NONE, SELF  # noqa: E402 - grouped with the settings it serves

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Celery: tasks carry IDs only, are acknowledged late and are safe to run twice: delivery is at least once per task
# (docs/architecture.md, "Delivery").
REDIS_URL = os.environ.get("REDIS_URL", "")
# Redis transport: a message taken by a worker that dies unacknowledged goes back to the queue after this many
# seconds (it was 3600). Shorter than the longest a healthy worker may hold a message (a countdown of up to 300 s
# plus reconcile_job's 180-s hard limit; reconcile_jobs' 960-s hard limit), the message is delivered a second time
# while the first copy still waits or runs: harmless, since every task is idempotent, but wasted work; so it exceeds
# the longest hold (960 s) by a margin (tests/unit/test_delivery.py checks every registered task).
# The work of a lost reconcile task is taken over sooner by the periodic resync: once the task's job claims lapsed
# (20 s after its worker died) or, for a task that never started, after GANGWEB_RESYNC_GRACE_SECONDS, plus one
# period; this only bounds when the message itself comes back.
GANGWEB_BROKER_VISIBILITY_TIMEOUT = int(os.environ.get("GANGWEB_BROKER_VISIBILITY_TIMEOUT", "1200"))
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": GANGWEB_BROKER_VISIBILITY_TIMEOUT}
    if REDIS_URL.startswith("redis://"):
        # kombu's Redis transport, publishing through one redis-py client per channel instead of a new one per
        # message (gangweb/broker.py). Other schemes (rediss://, sentinel://) keep kombu's own transport.
        CELERY_BROKER_TRANSPORT = "gangweb.broker:Transport"
else:
    _broker_dir = STATE_DIR / "broker"
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport with atomic message files, and a reader that sets aside (and logs) a message it
    # cannot parse instead of dying on it (gangweb/filebroker.py).
    CELERY_BROKER_TRANSPORT = "gangweb.filebroker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
    # kombu's filesystem transport creates only the control folder; without these a fresh checkout's worker dies
    # with FileNotFoundError on var/broker/queue and the web cannot enqueue.
    for _folder in ("queue", "processed", "control"):
        try:
            (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
        except OSError:  # read-only state dir: the worker reports the real error when it starts
            pass
CELERY_TASK_DEFAULT_QUEUE = "celery"  # reconcile, resync, probe and queue sync: `celery worker -Q celery`
# One cluster's work (reconcile, its resync, probe and queue sync) goes to its shard queue "reconcile.<n>", so a slow
# or unreachable API server holds only the slots of the workers consuming that shard (scheduling/work/routing.py,
# docs/operations.md "Per-cluster work queues"). A fixed count: every worker knows every queue name when it starts.
GANGWEB_RECONCILE_SHARDS = max(1, int(os.environ.get("GANGWEB_RECONCILE_SHARDS", "8")))
# Shards a worker consumes besides the queues given with -Q: "all", or a list like "0-3,6" (gangweb/celery.py).
GANGWEB_WORKER_SHARDS = os.environ.get("GANGWEB_WORKER_SHARDS", "")
# Client-side rate limit of the requests to one cluster's API server, per process (a token bucket, like client-go's
# QPS/Burst); a cluster's own `api_qps`/`api_burst` override these (scheduling/kube/throttle.py).
GANGWEB_CLUSTER_QPS = float(os.environ.get("GANGWEB_CLUSTER_QPS", "50"))
GANGWEB_CLUSTER_BURST = int(os.environ.get("GANGWEB_CLUSTER_BURST", "100"))
CELERY_TASK_ROUTES = (
    {
        "scheduling.notify_transitions": {"queue": GANGWEB_WEBHOOK_QUEUE},
        "scheduling.deliver_webhook": {"queue": GANGWEB_WEBHOOK_QUEUE},
    },
    "scheduling.work.routing.route",
)
# A worker keeps reconnecting to the broker for as long as it is down, at start and after a loss (Celery's default
# gives up after 100 attempts, ~50 minutes, and then exits); docs/architecture.md, "When a dependency fails".
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE_FILENAME = str(STATE_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULER = "scheduling.work.beat:LeasedScheduler"  # sends only under the beat lease: any replica count
CELERY_BEAT_MAX_LOOP_INTERVAL = 5  # seconds between ticks at most: the lease is renewed in a tick
CELERY_BEAT_SCHEDULE = {
    "resync-clusters": {"task": "scheduling.resync_all_clusters", "schedule": float(GANGWEB_RESYNC_SECONDS)},
    "probe-clusters": {"task": "scheduling.probe_all_clusters", "schedule": 60.0},
    "sync-queues": {"task": "scheduling.sync_queues", "schedule": float(GANGWEB_QUEUE_SYNC_SECONDS)},
    # A scan not started within a period is dropped (the next one covers the same window), so scans never pile up
    # in the webhook queue behind a busy worker.
    "notify-transitions": {"task": "scheduling.notify_transitions", "schedule": float(GANGWEB_NOTIFY_SCAN_SECONDS),
                           "options": {"expires": float(GANGWEB_NOTIFY_SCAN_SECONDS)}},
    "prune-job-history": {"task": "scheduling.prune_job_history", "schedule": 3600.0, "options": {"expires": 3600.0}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
