"""Storage for the glossary: endpoint, pair, suite, case, run, sample; plus the alerting rows
(rule, channel, alert, notification).

Rows hold data and the small rules that define them (a simulated pair, comparable runs, a run's
typed summary, a valid alert rule); workflows live in ``monitor.services`` and page reads in
``monitor.selectors``. API keys are never stored: an endpoint names the environment variable
that holds its key.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from croniter import croniter
from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.db.models import F
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from evals.claims import FORMS as CLAIM_FORMS
from evals.claims import METRICS as CLAIM_METRICS
from evals.claims import Claim
from evals.claims import problems as claim_problems
from evals.presets import PRESETS, resolve, unknown_preset
from evals.records import PROBE_FIELDS, PROBE_HEADERS, TIER_CHARS, EndpointSpec
from monitor.alerting import metrics_catalogue
from monitor.derived.run_summary import RunSummary
from monitor.env import EnvError, env_secret
from monitor.setup import validation

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


# An endpoint's key may come only from a variable named like a key, and never from the
# project's own settings: otherwise an admin could send DATABASE_URL or the secret key as the
# bearer token to any host.
KEY_ENV = re.compile(r"^[A-Z][A-Z0-9_]*_(API_KEY|KEY|TOKEN)$")
# The same rule holds for every "{env:NAME}" in an extra header (one rule for every secret an
# endpoint reads), and cloud credentials are the host's, never an endpoint's.
KEY_ENV_REFUSED_PREFIXES = (
    "TIERWATCH_",
    "DJANGO_",
    "CELERY_",
    "POSTGRES",
    "REDIS",
    "DATABASE",
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GCP_",
    "GITHUB_",
    "SECRET_",
)


def key_env_problem(name: str) -> str | None:
    """Why ``name`` may not hold an endpoint's key, or None when it may."""
    if not KEY_ENV.match(name):
        return (
            f"{name!r}: an endpoint's key variable must be named like a key "
            "(A-Z, 0-9, _, ending in _API_KEY, _KEY or _TOKEN), e.g. ACME_API_KEY"
        )
    if name.startswith(KEY_ENV_REFUSED_PREFIXES):
        refused = ", ".join(KEY_ENV_REFUSED_PREFIXES)
        return f"{name!r}: names starting with {refused} are the project's settings, not a key"
    return None


def validate_env_name(value: str) -> None:
    if value and not ENV_NAME.match(value):
        raise ValidationError(
            f"{value!r} is not an environment variable name (A-Z, 0-9, _); "
            "store the NAME of the variable holding the key, never the key itself"
        )


def validate_tier_fields(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        raise ValidationError(
            "served_tier_fields must be a list of header names or JSON keys, "
            'e.g. ["x-served-tier", "usage.service_tier"]'
        )


HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
CREDENTIAL_HEADERS = frozenset({"proxy-authorization", "cookie", "cookie2"})  # and any Proxy-*
HEADER_ENV = re.compile(r"\{env:([^{}]*)\}")  # "Bearer {env:GATEWAY_KEY}" in a header value


def validate_extra_body(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError('extra_body must be a mapping, e.g. {"service_tier": "priority"}')
    taken = sorted(k for k in value if k in PROBE_FIELDS)
    if taken:
        raise ValidationError(
            f"extra_body.{taken[0]}: set by the probe itself, so it cannot be overridden "
            "(max_tokens_field and send_temperature choose the token limit and temperature)"
        )


def validate_extra_headers(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError(
            'extra_headers must be a mapping, e.g. {"anthropic-beta": "fast-mode-2026-02-01"}'
        )
    for name, text in value.items():
        if not isinstance(name, str) or not HEADER_NAME.match(name):
            raise ValidationError(f"extra_headers: {str(name)[:60]!r} is not a header name")
        if name.lower() in CREDENTIAL_HEADERS or name.lower().startswith("proxy-"):
            raise ValidationError(
                f"extra_headers.{name}: carries credentials to a proxy or a session, which an "
                "endpoint never sends (an API key goes in api_key_env)"
            )
        if name.lower() in PROBE_HEADERS:
            raise ValidationError(
                f"extra_headers.{name}: set by the client itself (an API key goes in api_key_env)"
            )
        if not isinstance(text, str) or any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ValidationError(f"extra_headers.{name}: must be text on one line")
        for env in HEADER_ENV.findall(text):
            if not ENV_NAME.match(env):
                raise ValidationError(
                    f"extra_headers.{name}: {{env:{env[:40]}}} must name an environment "
                    "variable (A-Z, 0-9, _)"
                )
            if problem := key_env_problem(env):
                raise ValidationError(f"extra_headers.{name}: {problem}")


class WrittenURLField(models.URLField):
    """A URL field whose form takes the URL as written: Django's form field puts ``http://``
    in front of ``api.vendor.com/v1``, and a guessed scheme is where a key goes in clear
    (``monitor.setup.validation.base_url_problem`` says what to write instead)."""

    default_validators: list = []  # base_url_problem runs URLValidator after its own checks

    def formfield(self, **kwargs: Any) -> Any:
        return models.CharField.formfield(
            self, **{"form_class": forms.CharField, "widget": forms.URLInput, **kwargs}
        )


class Endpoint(models.Model):
    """One API target: protocol, base URL, model name and the env var holding its key."""

    PROTOCOLS = [
        ("openai", "OpenAI chat completions"),
        ("anthropic", "Anthropic messages"),
        ("responses", "OpenAI Responses API"),
    ]

    name = models.SlugField(max_length=80, unique=True)
    protocol = models.CharField(max_length=16, choices=PROTOCOLS, default="openai")
    base_url = WrittenURLField(max_length=300, help_text="e.g. https://api.vendor.com/v1")
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="Name of the environment variable that holds the API key (never the key).",
    )
    max_concurrency = models.PositiveSmallIntegerField(default=4)
    timeout_s = models.FloatField(default=120.0)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    extra_body = models.JSONField(default=dict, blank=True, validators=[validate_extra_body])
    extra_headers = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_extra_headers],
        help_text='Request headers, e.g. {"anthropic-beta": "fast-mode-2026-02-01"}; '
        '"{env:NAME}" in a value is read from that environment variable at request time.',
    )
    max_tokens_field = models.CharField(
        max_length=24,
        choices=[("max_tokens", "max_tokens"), ("max_completion_tokens", "max_completion_tokens")],
        default="max_tokens",
        help_text="OpenAI's reasoning models (GPT-5, o-series) take max_completion_tokens.",
    )
    send_temperature = models.BooleanField(
        default=True,
        help_text="Off for models that take only their default temperature (the request "
        "then has no temperature field).",
    )
    reasoning_effort = models.CharField(
        max_length=16,
        blank=True,
        choices=[(e, e) for e in ("none", "minimal", "low", "medium", "high", "xhigh")],
        help_text="OpenAI reasoning models: sent as reasoning_effort (Chat Completions) or "
        "reasoning.effort (Responses API); empty: the model's default.",
    )
    thinking_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1024)],
        help_text="Anthropic extended thinking: budget_tokens (at least 1024, below the cases' "
        "max_tokens); the request then has no temperature. Empty: no thinking.",
    )
    simulated = models.BooleanField(default=False, help_text="Served by the simulated demo vendor.")
    local = models.BooleanField(
        default=False,
        help_text="A server on this machine or network (the local vendor, a test server): "
        "http:// and loopback or private addresses allowed. Off: https:// to a public host.",
    )
    preset = models.CharField(
        max_length=40,
        blank=True,
        help_text="The vendor tier's preset (evals.presets) applied when saved: it fills the "
        "protocol, body, headers and served-tier fields; fields you set win.",
    )
    expected_tier = models.CharField(
        max_length=TIER_CHARS,
        blank=True,
        help_text="The tier the vendor should report serving, e.g. 'priority'; empty: not checked.",
    )
    served_tier_fields = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tier_fields],
        help_text="Response header names or JSON keys (dotted) that report the tier served, "
        "besides OpenAI's service_tier and Anthropic's usage.service_tier.",
    )
    notes = models.TextField(blank=True)
    # Prices in USD per million tokens (monitor.runs.budget turns usage into cost);
    # cached input falls back to the input price when the vendor does not price it apart.
    price_input_per_mtok = models.FloatField(null=True, blank=True)
    price_output_per_mtok = models.FloatField(null=True, blank=True)
    price_cached_input_per_mtok = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name + (" (simulated)" if self.simulated else "")

    def clean(self) -> None:
        super().clean()
        if self.api_key_env and (problem := key_env_problem(self.api_key_env)):
            raise ValidationError({"api_key_env": problem})
        # a simulated endpoint is the demo vendor on this machine: local by definition
        local = self.local or self.simulated
        if problem := validation.base_url_problem(self.base_url, local=local):
            raise ValidationError({"base_url": problem})
        if self.preset and self.preset not in PRESETS:
            raise ValidationError({"preset": unknown_preset(self.preset)})
        if self.reasoning_effort and self.protocol == "anthropic":
            raise ValidationError(
                {"reasoning_effort": "OpenAI's field: for Anthropic set thinking_budget"}
            )
        if self.thinking_budget and self.protocol != "anthropic":
            raise ValidationError(
                {"thinking_budget": "Anthropic's field: for OpenAI set reasoning_effort"}
            )

    def apply_preset(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Fill the fields the preset sets (``evals.presets.resolve``), the ``given`` ones (the
        fields the user set: a config file's keys, a form's changed fields) winning; returns
        what it set. The one way a preset is applied: by ``apply_config`` and by the admin
        form alike."""
        fields = resolve(self.preset, given) if self.preset in PRESETS else {}
        for name, value in fields.items():
            setattr(self, name, value)
        return fields

    def api_key(self) -> str | None:
        """Read at request time, so a rotated key needs no database change; stripped, and
        refused naming the variable if it holds a control character (``env_secret``). A
        variable not named like a key is refused here too, whatever wrote the row."""
        if not self.api_key_env:
            return None
        if problem := key_env_problem(self.api_key_env):
            raise ValueError(f"endpoint {self.name}: {problem}")
        return env_secret(self.api_key_env)

    def spec(self) -> EndpointSpec:
        """What the client needs; the key is read from the environment now and lives only in
        memory."""
        headers, secrets = self.request_headers()
        return EndpointSpec(
            name=self.name,
            protocol=self.protocol,
            base_url=self.base_url.rstrip("/"),
            model=self.model,
            api_key=self.api_key(),
            timeout_s=self.timeout_s,
            extra_body=dict(self.extra_body or {}),
            served_tier_fields=tuple(self.served_tier_fields or ()),
            extra_headers=headers,
            secrets=secrets,
            max_tokens_field=self.max_tokens_field,
            send_temperature=self.send_temperature,
            reasoning_effort=self.reasoning_effort,
            thinking_budget=self.thinking_budget,
            public_only=not (self.local or self.simulated),  # evals.addresses, at connect time
        )

    def request_headers(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """``extra_headers`` with each ``{env:NAME}`` read now, and the values read (secrets,
        scrubbed from everything the vendor sends back). An unset variable is refused by
        name: a header sent without its secret would fail as the vendor's 401."""
        headers, secrets = {}, []
        for name, template in (self.extra_headers or {}).items():

            def read(match: re.Match[str], name: str = name) -> str:
                if problem := key_env_problem(match.group(1)):  # a row saved before the rule
                    raise EnvError(f"extra_headers.{name}: {problem}")
                value = env_secret(match.group(1))
                if value is None:
                    raise EnvError(f"extra_headers.{name}: {match.group(1)} is not set")
                secrets.append(value)
                return value

            headers[name] = HEADER_ENV.sub(read, template)
        return headers, tuple(secrets)


class Suite(models.Model):
    name = models.SlugField(max_length=80)
    version = models.PositiveIntegerField(default=1)
    description = models.TextField(blank=True)

    class Meta:
        unique_together = [("name", "version")]
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Case(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    key = models.SlugField(max_length=120)
    category = models.CharField(max_length=32, default="general")
    scenario = models.CharField(max_length=32, default="mid")
    difficulty = models.CharField(max_length=16, default="easy")
    messages = models.JSONField()
    max_tokens = models.PositiveIntegerField(default=256)
    unit_tests = models.TextField(blank=True)
    entry_point = models.CharField(max_length=100, blank=True)
    constraints = models.JSONField(default=list, blank=True)
    # capability cases (evals.benchmarks): functions offered, possible answers ([] = no call
    # is right), and a response format for structured-output cases
    tools = models.JSONField(default=list, blank=True)
    tool_answers = models.JSONField(null=True, blank=True)
    response_format = models.JSONField(null=True, blank=True)
    # a multi-turn agent task (``evals.records.CaseSpec.agent``: where it is read from): played
    # as an episode of several requests, not sent as one
    agent = models.JSONField(null=True, blank=True)

    class Meta:
        unique_together = [("suite", "key")]
        ordering = ["suite", "key"]

    def __str__(self) -> str:
        return f"{self.suite}:{self.key}"

    @property
    def is_benchmark(self) -> bool:
        """A capability case (``BENCHMARK_CASES``, the same rule as a query)."""
        return (
            self.tool_answers is not None
            or self.response_format is not None
            or "/" in self.category
        )


# A capability case: it offers tools, asks for a format, or has a benchmark category
# ("tool_calls/simple", "code/humaneval", "long_tail/rare_apis"…). ``Case.is_benchmark`` is the
# same rule for one row; keep the two together.
BENCHMARK_CASES = (
    models.Q(category__contains="/")
    | models.Q(tool_answers__isnull=False)
    | models.Q(response_format__isnull=False)
)


def new_generation() -> int:
    """A new pair's first ``generation``: random, far below the field's 2**63 limit."""
    return secrets.randbits(60)


class Pair(models.Model):
    """A fast endpoint and a base endpoint that a vendor says serve the same model."""

    name = models.SlugField(max_length=80, unique=True)
    fast = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="pairs_as_fast")
    base = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="pairs_as_base")
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="pairs")
    # The vendor's speed claim in its own metric and form (evals.claims): "2.5× output tok/s"
    # is (output_tps, factor, 2.5); "99 % of requests ≥ 80 tok/s" is (output_tps, floor, 80, 99).
    claim_metric = models.CharField(
        max_length=16,
        choices=[(k, v) for k, v in CLAIM_METRICS.items()],
        default="e2e",
        help_text="What the vendor promises: output tokens/s, TTFT or E2E.",
    )
    claim_form = models.CharField(
        max_length=8,
        choices=[(k, v) for k, v in CLAIM_FORMS.items()],
        default="factor",
        help_text="A factor over the base tier, or a floor the fast tier meets at a percentile.",
    )
    claim_value = models.FloatField(
        null=True,
        blank=True,
        help_text="The factor (e.g. 6), or the floor (tok/s for output tokens/s, ms for TTFT "
        "and E2E); empty: no claim stated.",
    )
    claim_percentile = models.FloatField(
        null=True,
        blank=True,
        help_text="Floor only: the share of requests, in percent, that must meet it (e.g. 99).",
    )
    include_downgraded = models.BooleanField(
        default=False,
        help_text="Count samples the vendor served on another tier than expected in the "
        "speed-ups, claims, verdict and capability figures (evals.served).",
    )
    repeat = models.PositiveSmallIntegerField(
        default=2,
        help_text="Repetitions per case per tier; 2 or more gives the noise floor (base vs base)",
    )
    cases_per_run = models.PositiveIntegerField(null=True, blank=True)
    slo_ttft_ms = models.FloatField(null=True, blank=True)
    slo_e2e_ms = models.FloatField(null=True, blank=True)
    active = models.BooleanField(default=True)
    daily_budget_usd = models.FloatField(
        null=True,
        blank=True,
        help_text="Spend cap per UTC day for this pair's probes; each run takes the cases it "
        "can afford (monitor.runs.budget). Empty: no cap.",
    )
    # The version of what the pair's runs left behind (``monitor.derived.page_cache``): bumped
    # in the same transaction as every summary write, run end and derived-data write, so a
    # reader that sees new data also sees a new version. It starts at a random value, so a new
    # pair under an id used before (SQLite reuses ids; a test database restarts them) never
    # meets an old pair's cached pages. Never set by hand.
    generation = models.PositiveBigIntegerField(default=new_generation, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def simulated(self) -> bool:
        """A pair with either tier on the simulated vendor: its numbers are not a vendor's."""
        return self.fast.simulated or self.base.simulated

    @property
    def slo(self) -> dict[str, float]:
        """The pair's service-level objectives by sample field (only those that are set)."""
        return {k: v for k, v in (("ttft_ms", self.slo_ttft_ms), ("e2e_ms", self.slo_e2e_ms)) if v}

    @property
    def claim(self) -> Claim | None:
        """The vendor's claim (``evals.claims.Claim``), None when no value is stated."""
        if self.claim_value is None:
            return None
        return Claim(self.claim_metric, self.claim_form, self.claim_value, self.claim_percentile)

    def clean(self) -> None:
        """``monitor.setup.validation.pair_problems`` (two endpoints, repeat ≥ 1), then the
        claim's own problems (``evals.claims.problems``)."""
        super().clean()
        problems = validation.pair_problems(
            fast_id=self.fast_id, base_id=self.base_id, repeat=self.repeat
        )
        if problems:
            raise ValidationError(problems)
        if self.claim_value is None and self.claim_percentile is None:
            return
        found = claim_problems(
            self.claim_metric, self.claim_form, self.claim_value, self.claim_percentile
        )
        errors: dict[str, list[str]] = {}
        for line in found:
            field, _, problem = line.partition(": ")
            errors.setdefault(f"claim_{field.split('.')[-1]}", []).append(problem)
        if errors:
            raise ValidationError(errors)


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    # measured; its generated code waits for (or is in) the sandbox queue (pipeline.evaluate_run)
    EVALUATING = "evaluating"
    DONE = "done"
    FAILED = "failed"


class RunKind(models.TextChoices):
    PROBE = "probe", "probe (temperature 0)"
    AUDIT = "audit", "audit (temperature 1)"
    LOAD = "load", "load probe (concurrency levels)"
    TRIPWIRE = "tripwire", "tripwire (one token, logprobs)"


class RunTrigger(models.TextChoices):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    TRIPWIRE = "tripwire"  # an audit scheduled at once because a tripwire fired


class RunQuerySet(models.QuerySet):
    def trend(self) -> RunQuerySet:
        """Runs comparable over time: finished temperature-0 probes at the pair's own
        concurrency. Audits (temperature 1) and load probes (other concurrencies) measure
        something else and would bend a trend or an alert's mean."""
        return self.filter(status=RunStatus.DONE, kind=RunKind.PROBE)

    def merge_summary(self, run_id: int, **blocks: object) -> RunSummary:
        """The one writer of ``Run.summary``: replace the named blocks (``RunSummary`` field
        names; values are blocks or None to drop one) under a row lock, so two writers (the
        summariser and the verdict, say) never lose each other's block. The pair's generation
        is bumped in the same transaction (its cached pages are keyed on it)."""
        with transaction.atomic():
            run = self.select_for_update().only("id", "pair_id", "summary").get(id=run_id)
            merged = run.summary_obj.replace(**blocks)
            self.filter(id=run_id).update(summary=merged.to_json())
            bump_generation([run.pair_id])
        return merged

    def end(self, status: str, **fields: object) -> int:
        """The one writer of a run's end (done or failed, with ``finished_at`` now unless
        given): how many of these runs it ended. Their pairs' generations are bumped in the same
        transaction, as after a summary write: a run that ends changes what the pages show (a
        trend run becomes comparable, an audit's verdict becomes the newest). What the run
        leaves behind is written by ``monitor.derived.run_end.record_run_end``, which every
        path that ends a run calls after its last write."""
        with transaction.atomic():
            pair_ids = set(self.values_list("pair_id", flat=True))
            ended = self.update(
                status=status, finished_at=fields.pop("finished_at", timezone.now()), **fields
            )
            if ended:
                bump_generation(pair_ids)
        return ended


def bump_generation(pair_ids: Iterable[int]) -> None:
    """A new ``Pair.generation`` for these pairs, inside the caller's transaction."""
    Pair.objects.filter(pk__in=list(pair_ids)).update(generation=F("generation") + 1)


class Run(models.Model):
    """One execution of a suite against a pair; its summary is computed from stored samples."""

    objects = RunQuerySet.as_manager()

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="runs")
    kind = models.CharField(max_length=16, choices=RunKind, default=RunKind.PROBE)
    trigger = models.CharField(max_length=16, choices=RunTrigger, default=RunTrigger.MANUAL)
    status = models.CharField(
        max_length=16, choices=RunStatus, default=RunStatus.QUEUED, db_index=True
    )
    seed = models.BigIntegerField(default=0)
    temperature = models.FloatField(default=0.0)
    repeat = models.PositiveSmallIntegerField(default=1)
    planned = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Liveness (monitor.runs.heartbeat): the owner beats while it measures; a claim bumps
    # ``attempt`` so a worker whose stale run was taken over or reaped stops on its next beat.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # when its timed requests ended and the run was handed to the sandbox queue (EVALUATING)
    measured_at = models.DateTimeField(null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(default=0)
    # when its task was last sent (``monitor.runs.watchdog.resend_lost``): a queued run whose
    # message a killed worker took with it is sent again instead of blocking its pair
    sent_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    verdict = models.TextField(blank=True)
    error = models.TextField(blank=True)
    in_maintenance = models.BooleanField(
        default=False, help_text="measured during a maintenance window of its pair"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["pair", "-created_at"]),
            # the /metrics scrape counts every pair's runs by status: an index-only scan of this
            # instead of reading the whole table (docs/benchmarks.md, "Scale")
            models.Index(fields=["pair", "status"], name="run_pair_status"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.pair} ({self.status})"

    @property
    def progress_percent(self) -> int:
        return int(100 * self.completed / self.planned) if self.planned else 0

    @property
    def summary_obj(self) -> RunSummary:
        """The stored summary, typed (``monitor.derived.run_summary``); empty blocks while running.
        Decoded once per stored value (the pair page's charts read it ~10 times a run: 40 % of a
        cold view's CPU); a new value (assigned, refreshed) is decoded again. Code replaces
        ``summary``, never edits it in place (``RunQuerySet.merge_summary`` writes it)."""
        memo = self.__dict__.get("_summary_memo")
        if memo is None or memo[0] is not self.summary:
            memo = (self.summary, RunSummary.from_json(self.summary))
            self.__dict__["_summary_memo"] = memo
        return memo[1]

    @property
    def active(self) -> bool:
        return self.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.EVALUATING)


@receiver(post_delete, sender=Run)
def _run_deleted(sender: type[Run], instance: Run, **kwargs: object) -> None:
    """A deleted run (the admin, a cascade) changes what the pages show, as its end did."""
    bump_generation([instance.pair_id])


AGENT_SCENARIO = "agent"  # the speed scenario of an agent episode's requests (Sample.scenario)


class Sample(models.Model):
    """One request's full record: timings, token counts, text, errors, provenance."""

    TIERS = [("fast", "fast"), ("base", "base")]

    # No index of their own on run and endpoint: the (run, tier) and (endpoint, started_at)
    # indexes below start with them and serve every lookup (docs/benchmarks.md, "Scale").
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples", db_index=False)
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="samples")
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.PROTECT, related_name="samples", db_index=False
    )
    tier = models.CharField(max_length=8, choices=TIERS)
    batch = models.PositiveSmallIntegerField(default=0, help_text="independent batch (A-vs-A)")
    repetition = models.PositiveSmallIntegerField(default=0)
    seq = models.PositiveIntegerField(default=0, help_text="position in the interleaved plan")
    # An agent task's episode is several requests of one (case, tier, batch, repetition): each
    # is a sample, placed by its turn and its step in the turn (docs/measures.md, "Multi-turn
    # agent tasks"); a one-request case has turn None and step 0. ``calls`` are the tool calls
    # the request made with what the task's environment answered, scrubbed like any vendor
    # text. The episode's score is on its last sample (``tests_passed``), so every capability
    # read counts one outcome per episode.
    turn = models.PositiveSmallIntegerField(null=True, blank=True)
    step = models.PositiveSmallIntegerField(default=0)
    calls = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(db_index=True)
    ok = models.BooleanField()
    error_class = models.CharField(max_length=32, blank=True, db_index=True)
    error_message = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    retry_after_s = models.FloatField(null=True, blank=True)
    connect_ms = models.FloatField(null=True, blank=True)
    headers_ms = models.FloatField(null=True, blank=True)
    ttfb_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    # first answer token (text, refusal or tool call), reasoning left out; = ttft_ms for a
    # model that streamed no reasoning first (docs/measures.md, "TTFT of a reasoning model")
    ttft_answer_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    tpot_ms = models.FloatField(null=True, blank=True)
    chunk_gaps_ms = models.JSONField(default=list, blank=True)
    chunk_tokens = models.JSONField(default=list, blank=True)
    text = models.TextField(blank=True)
    reasoning_text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    estimated_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    model_id = models.CharField(max_length=200, blank=True)
    system_fingerprint = models.CharField(max_length=200, blank=True)
    served_tier = models.CharField(
        max_length=TIER_CHARS, blank=True, help_text="as the vendor reported"
    )
    headers = models.JSONField(default=dict, blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    server_timings = models.JSONField(null=True, blank=True)
    tests_passed = models.BooleanField(null=True, blank=True)
    tests_detail = models.JSONField(null=True, blank=True)
    # Set when monitor.derived.retention emptied the payload (text, gaps, tokens, logprobs,
    # headers).
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # No default ordering: it made every unordered query join runs and sort;
        # callers that need plan order say .order_by("seq").
        indexes = [
            models.Index(fields=["run", "tier"]),
            models.Index(fields=["endpoint", "started_at"]),
            models.Index(
                fields=["started_at"],
                condition=models.Q(pruned_at__isnull=True),
                name="sample_unpruned_started",
            ),
        ]

    def __str__(self) -> str:
        return f"sample {self.pk} {self.tier} {self.case.key}"

    @property
    def scenario(self) -> str:
        """The speed scenario the sample counts in: its case's, but an agent episode's requests
        make one of their own (``AGENT_SCENARIO``): their prompts grow turn by turn, the shape
        of no other scenario."""
        return AGENT_SCENARIO if self.turn is not None else self.case.scenario


class Beacon(models.Model):
    """The last time a periodic part of the system was seen alive (the watchdog task), read by
    ``/health`` in another process, so it lives in the database rather than a cache."""

    name = models.SlugField(max_length=80, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at:%Y-%m-%d %H:%M:%S}"


class Channel(models.Model):
    """Where alerts go. A Slack webhook URL is a secret: the channel names its env var."""

    KINDS = [
        ("email", "email"),
        ("slack", "Slack incoming webhook"),
        ("apprise", "Apprise URLs (Teams, Discord, Telegram, Opsgenie, JSON webhook, ...)"),
        ("webhook", "webhook, HMAC-SHA256 signed"),
        ("pagerduty", "PagerDuty Events v2"),
    ]

    name = models.SlugField(max_length=80, unique=True)
    kind = models.CharField(max_length=16, choices=KINDS)
    target = models.CharField(
        max_length=500,
        help_text=(
            "email: comma-separated addresses; webhook: the URL; slack, apprise, pagerduty: "
            "NAME of the env var with the webhook URL, the apprise URLs or the routing key"
        ),
    )
    secret_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="webhook: NAME of the env var holding the HMAC signing secret",
    )
    disabled = models.BooleanField(default=False)
    last_error = models.TextField(blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    def clean(self) -> None:
        """A webhook's URL and signing secret, email addresses (``monitor.setup.validation``):
        checked when the channel is configured rather than when an alert fails to go out."""
        super().clean()
        problem = None
        if self.kind == "webhook":
            problem = validation.webhook_problem(self.target, self.secret_env)
        elif self.kind == "email":
            problem = validation.email_problem(self.target)
        if problem:
            field = "secret_env" if problem.startswith("a webhook needs") else "target"
            raise ValidationError({field: problem})


class AlertRule(models.Model):
    """Threshold on a run metric over the last K runs, evaluated only with at least min_n."""

    OPS = [("gt", ">"), ("lt", "<")]
    TIERS = [("fast", "fast"), ("base", "base"), ("pair", "pair")]

    name = models.SlugField(max_length=80, unique=True)
    pair = models.ForeignKey(
        Pair, null=True, blank=True, on_delete=models.CASCADE, help_text="empty: every pair"
    )
    metric = models.CharField(max_length=40)
    tier = models.CharField(max_length=8, choices=TIERS, default="fast")
    op = models.CharField(max_length=2, choices=OPS, default="gt")
    threshold = models.FloatField()
    last_k = models.PositiveSmallIntegerField(default=3)
    min_n = models.PositiveIntegerField(default=5)
    channels = models.ManyToManyField(Channel, blank=True)
    enabled = models.BooleanField(default=True)
    renotify_hours = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="remind every N hours while firing and not acknowledged"
    )
    escalate_after_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="notify the escalation channels after M minutes unacked"
    )
    escalation_channels = models.ManyToManyField(
        Channel, blank=True, related_name="escalating_rules"
    )

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A known metric with a tier that fits it (``monitor.alerting.metrics_catalogue``)."""
        problem = metrics_catalogue.problem(self.metric, self.tier)
        if problem:
            raise ValidationError({"metric": problem})
        unit = metrics_catalogue.metric(self.metric).unit
        if problem := validation.threshold_problem(self.metric, unit, self.threshold):
            raise ValidationError({"threshold": problem})


class AlertState(models.TextChoices):
    FIRING = "firing"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Alert(models.Model):
    """One breach of a rule on a pair, from opening to resolution
    (``monitor.alerting.lifecycle`` changes its state)."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="alerts")
    run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="alerts")
    opened_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField()
    value = models.FloatField(null=True)
    state = models.CharField(max_length=16, choices=AlertState, default=AlertState.FIRING)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    ack_note = models.TextField(blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    last_notified_at = models.DateTimeField(null=True, blank=True)
    notify_count = models.PositiveIntegerField(default=0)
    escalated_at = models.DateTimeField(null=True, blank=True)
    flapping = models.BooleanField(default=False)

    class Meta:
        ordering = ["-opened_at"]

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class AlertTransition(models.Model):
    """One state change of an alert (opened, acknowledged, silenced, resolved, reminded,
    escalated), for the incident timeline and the flapping count."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="transitions")
    kind = models.CharField(max_length=16)
    at = models.DateTimeField(db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "pk"]


class Notification(models.Model):
    """Every delivery attempt of an alert to a channel, with its error (healthchecks' model)."""

    alert = models.ForeignKey(
        Alert, null=True, on_delete=models.CASCADE, related_name="notifications"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    created_at = models.DateTimeField(auto_now_add=True)
    subject = models.CharField(max_length=300)
    ok = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    permanent = models.BooleanField(default=False)
    kind = models.CharField(max_length=16, blank=True, help_text="trigger, resolve, reminder, ...")
    held = models.CharField(
        max_length=16,
        blank=True,
        help_text="why it was held and not sent: maintenance, silenced, flapping",
    )

    class Meta:
        ordering = ["-created_at"]


class MaintenanceWindow(models.Model):
    """A time when a pair, a vendor (by host) or everything is expected to misbehave: runs keep
    measuring and are marked, notifications are held. One-off (start and end) or recurring (a
    cron expression in UTC, e.g. ``0 2 * * SUN``, and a duration)."""

    pair = models.ForeignKey(
        Pair, null=True, blank=True, on_delete=models.CASCADE, related_name="maintenance_windows"
    )
    vendor_host = models.CharField(
        max_length=200,
        blank=True,
        help_text="host of an endpoint's base URL, e.g. api.vendor.com; empty with no pair: all",
    )
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    cron = models.CharField(max_length=100, blank=True, help_text="recurring: start times (UTC)")
    duration_minutes = models.PositiveIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=300)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        scope = self.pair.name if self.pair else (self.vendor_host or "all pairs")
        when = (
            self.cron
            and f"{self.cron} for {self.duration_minutes} min"
            or (
                f"{self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M} UTC"
                if self.starts_at and self.ends_at
                else "?"
            )
        )
        return f"{scope}: {when} ({self.reason})"

    def clean(self) -> None:
        if self.pair_id and self.vendor_host:
            raise ValidationError({"vendor_host": "give a pair or a vendor host, not both"})
        if self.cron:
            if not croniter.is_valid(self.cron):
                raise ValidationError({"cron": f"{self.cron!r} is not a cron expression"})
            if not self.duration_minutes:
                raise ValidationError({"duration_minutes": "a recurring window needs a duration"})
            if self.starts_at or self.ends_at:
                raise ValidationError({"cron": "give a cron expression or start/end, not both"})
        elif not (self.starts_at and self.ends_at):
            raise ValidationError({"starts_at": "give start and end, or a cron expression"})
        elif self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "the end must be after the start"})


class ConfigChange(models.Model):
    """Who changed which configuration row, when, from where, with the changed fields
    (``monitor.setup.audit``). Values are the stored ones: env var names, never secrets."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True, help_text="kept if the user goes")
    source = models.CharField(max_length=200, help_text="admin, apply_config FILE, pair page")
    action = models.CharField(max_length=8)  # added, changed, deleted
    model = models.CharField(max_length=60)
    object_id = models.CharField(max_length=60)
    object_repr = models.CharField(max_length=200)
    diff = models.JSONField(default=dict, help_text="field: [old, new]")

    class Meta:
        ordering = ["-at", "-pk"]


class ReportArchive(models.Model):
    """One generated SLA report, kept so that what was sent to a vendor can be shown later.

    The file lives in the database, not under var/: the worker that writes it and the web
    process that serves it need share nothing but the database. Regenerating a period and
    format replaces its row (a retried task adds no duplicate).
    """

    KINDS = [("week", "weekly"), ("month", "monthly")]
    FORMATS = [("pdf", "PDF"), ("csv", "CSV"), ("html", "HTML"), ("text", "text")]

    kind = models.CharField(max_length=8, choices=KINDS)
    period = models.CharField(max_length=10, help_text="YYYY-Www or YYYY-MM")
    format = models.CharField(max_length=8, choices=FORMATS)
    content = models.BinaryField()
    size = models.PositiveIntegerField(default=0)
    render_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now=True, help_text="when this file was generated")

    class Meta:
        ordering = ["-period", "format"]
        constraints = [
            models.UniqueConstraint(fields=["period", "format"], name="one_report_per_format")
        ]

    def __str__(self) -> str:
        return f"SLA report {self.period} ({self.format})"

    @property
    def filename(self) -> str:
        ext = {"text": "txt"}.get(self.format, self.format)
        return f"tierwatch-sla-{self.period}.{ext}"


class RunRollup(models.Model):
    """One finished run's tier, counted once when the run is summarised
    (``monitor.derived.rollups``):
    what the SLA report and long-window percentiles need, kept for good while sample payloads
    expire. Latency is a mergeable sketch (``evals.sketch``), not a list of values."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollups")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="rollups")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="rollups")
    tier = models.CharField(max_length=8)
    kind = models.CharField(max_length=16)  # the run's kind and trigger, copied for filtering
    trigger = models.CharField(max_length=16)
    at = models.DateTimeField(help_text="the run's start (created_at)")
    n = models.PositiveIntegerField(default=0)
    n_ok = models.PositiveIntegerField(default=0)
    rate_limited = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=dict, blank=True)  # failed samples by class
    ttft_sketch = models.JSONField(default=dict, blank=True)
    e2e_sketch = models.JSONField(default=dict, blank=True)
    goodput_met = models.PositiveIntegerField(default=0)  # of n, when the pair has an SLO
    n_tested = models.PositiveIntegerField(default=0)
    n_passed = models.PositiveIntegerField(default=0)
    served = models.JSONField(default=dict, blank=True)  # reported tier → successful requests
    retried = models.PositiveIntegerField(default=0)  # requests retried on a stale connection
    # tokens of the answers with a reported prompt count: the run's cost at any prices
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    cases = models.JSONField(
        default=dict, blank=True
    )  # per case: monitor.derived.rollups docstring

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "tier"], name="rollup_run_tier")]
        indexes = [models.Index(fields=["at", "endpoint"]), models.Index(fields=["pair", "at"])]


class ProvenanceEvent(models.Model):
    """A model id or system fingerprint an endpoint returned: first and last seen, how often.
    Upserted when a run is summarised, so the verdict page never scans samples for it."""

    KINDS = [("model_id", "model id"), ("fingerprint", "fingerprint")]

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="provenance")
    kind = models.CharField(max_length=16, choices=KINDS)
    value = models.CharField(max_length=200)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    run = models.ForeignKey(
        Run,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the run where the value was first seen",
    )
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "kind", "value"], name="provenance_endpoint_kind_value"
            )
        ]


class ApiToken(models.Model):
    """A user's API token. Only its SHA-256 digest is stored: the token is printed once when
    created (``manage.py api_token create USER``) and cannot be read back."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=80, blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="to tell tokens apart")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class Baseline(models.Model):
    """A pair's frozen drift baseline: the runs it was computed from and their statistics
    (``evals.stats.cusum.Baseline`` as JSON), who set it and when. It never slides: a new one
    replaces it only when a person acknowledges a change (``monitor.derived.evidence``)."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="baselines")
    run_ids = models.JSONField(default=list)
    statistics = models.JSONField(default=dict)
    set_by = models.CharField(max_length=150, help_text='"automatic" or the user who set it')
    set_at = models.DateTimeField(auto_now_add=True)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["-set_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair"],
                condition=models.Q(active=True),
                name="one_active_baseline_per_pair",
            )
        ]


class PairMonitorState(models.Model):
    """A pair's evidence across runs, updated run by run and never recomputed: the e-process
    of its audits, the CUSUM sums of its probes against the active baseline, and the loss
    detectors of its capability categories (JSON of ``evals.stats.eprocess.EProcessState``,
    ``evals.stats.cusum.CusumState`` and ``evals.stats.capability_loss.LossState``)."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="monitor_state")
    eprocess = models.JSONField(default=dict, blank=True)
    cusum = models.JSONField(default=dict, blank=True)
    # per category, the capability loss e-detector (monitor.derived.loss_detectors)
    capability = models.JSONField(default=dict, blank=True)
    last_audit = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    last_probe = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    since = models.DateTimeField(null=True, blank=True, help_text="last acknowledgement")
    acknowledged_by = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class TripwireState(models.Model):
    """A pair's logprob tripwires across runs (``monitor.derived.tripwire``): per tier its
    frozen reference window, its e-detector and its newest test; fast against base with its
    noise floor; and, once one fired, which tier, on which run, and the audit it triggered."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="tripwire_state")
    # per tier: reference {prompt: [{token: logprob}]}, reference_runs, eprocess (JSON of
    # evals.stats.eprocess.EProcessState), last {run, statistic, p, e}, skipped (a reason)
    tiers = models.JSONField(default=dict, blank=True)
    cross = models.JSONField(default=dict, blank=True)  # {distance, floor, run}
    fired_tier = models.CharField(max_length=8, blank=True)
    fired_run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    fired_at = models.DateTimeField(null=True, blank=True)
    audit = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)
    # border-input discovery (``monitor.runs.border``) costs hundreds of requests per tier: it
    # starts only once an operator confirmed its stated cost, or the config enabled it
    border_allowed = models.BooleanField(default=False)
