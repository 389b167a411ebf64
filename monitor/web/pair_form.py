"""The "add a pair" form: two endpoints from a preset, the pair, its cadences, checked by the
models' own validators before anything is written, and saved in one transaction with what a pair
added by hand gets (``monitor.setup.pair_defaults``: schedules, the "outputs differ" rule).

Field checks live in ``clean`` and go through ``Endpoint.full_clean`` / ``Pair.full_clean``,
so a shared validation of URLs and fields added to the models reaches this form with no change
here; each model error is shown on the form field it came from ("fast base URL: …"). The
"self-hosted" box (both endpoints ``local``) is there only for a user who may change endpoints
(admins, ``monitor.web.access.MARK_LOCAL``); sent by anyone else it is refused, not ignored.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction

from evals.claims import problems as claim_problems
from evals.presets import PAIR_PRESETS, PRESETS, resolve
from monitor.models import Endpoint, Pair, Suite
from monitor.setup import audit, pair_defaults
from monitor.web.access import MARK_LOCAL

TIERS = ("fast", "base")
# Two generic choices (any vendor speaking that protocol; the fields typed are all there is)
# and every pair preset of ``evals.presets`` (each tier from its vendor preset: request shape,
# served-tier fields, expected tier; a base URL or key variable left empty comes from it).
PROTOCOL_PRESETS = {"openai": "OpenAI-compatible (any vendor)", "anthropic": "Anthropic"}
PAIRS = {pp.name: pp for pp in PAIR_PRESETS}
# model field → form field suffix, so a model's error lands on the field the person typed in
ENDPOINT_FIELDS = {"base_url": "base_url", "model": "model", "api_key_env": "key_env"}


def preset_choices() -> list[tuple[str, str]]:
    return [*PROTOCOL_PRESETS.items(), *((pp.name, pp.title) for pp in PAIR_PRESETS)]


def preset_fields(name: str, tier: str, typed: dict[str, str]) -> dict[str, Any]:
    """The tier's endpoint fields: what was typed, over the tier's vendor preset when ``name``
    is a pair preset (``evals.presets.resolve``, the same merge as config files and the admin)."""
    if name not in PAIRS:
        return {**typed, "protocol": name}
    preset = getattr(PAIRS[name], tier)
    given = {k: v for k, v in typed.items() if v}
    return {**typed, **resolve(preset, given), "preset": preset}


def preset_claim(name: str) -> dict[str, Any]:
    """The pair's claim fields from its fast tier's preset (the vendor's own promise, e.g.
    Anthropic fast mode's "up to 2.5x output tokens/s"), when the preset states one the claim
    rules accept (a floor with no percentile is the vendor's wording only); else none."""
    if name not in PAIRS or (claim := PRESETS[PAIRS[name].fast].claim) is None:
        return {}
    fields = (claim.metric, claim.form, claim.value, claim.percentile)
    if claim_problems(*fields, where="claim"):
        return {}
    keys = ("claim_metric", "claim_form", "claim_value", "claim_percentile")
    return dict(zip(keys, fields, strict=True))


class AddPairForm(forms.Form):
    name = forms.SlugField(max_length=80, help_text="The pair's name in URLs and alerts.")
    preset = forms.ChoiceField(choices=preset_choices, initial="openai")
    fast_base_url = forms.CharField(
        label="fast base URL",
        max_length=500,
        required=False,
        help_text="Left empty: the vendor preset's URL (a generic choice needs one).",
    )
    fast_model = forms.CharField(label="fast model", max_length=200)
    fast_key_env = forms.CharField(
        label="fast key variable",
        max_length=100,
        required=False,
        help_text="The NAME of the environment variable holding the key, e.g. ACME_API_KEY.",
    )
    base_base_url = forms.CharField(label="base base URL", max_length=500, required=False)
    base_model = forms.CharField(label="base model", max_length=200)
    base_key_env = forms.CharField(label="base key variable", max_length=100, required=False)
    local = forms.BooleanField(
        label="self-hosted",
        required=False,
        help_text="Both servers are on this machine or your network (vLLM, llama.cpp): "
        "http:// and private addresses allowed. Off: https:// to a public host only.",
    )
    suite = forms.ModelChoiceField(queryset=Suite.objects.none(), required=True)
    repeat = forms.IntegerField(
        min_value=1,
        initial=2,
        help_text="Repetitions per case and tier; 2 or more gives the base-vs-base noise floor.",
    )
    probe_every_minutes = forms.IntegerField(
        label="probe every", min_value=1, required=False, initial=pair_defaults.PROBE_EVERY_MIN
    )
    audit_every_hours = forms.IntegerField(
        label="audit every", min_value=1, required=False, initial=pair_defaults.AUDIT_EVERY_H
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self-hosted is an admin's: an operator's box would aim the server at its own network
        # (a database port, the metadata service), so it is not offered, and refused if sent
        self.may_mark_local = user is not None and user.has_perm(MARK_LOCAL)
        if not self.may_mark_local:
            del self.fields["local"]
        pair_defaults.sync_suites()
        suites = Suite.objects.order_by("name", "-version")
        self.fields["suite"].queryset = suites
        smoke = suites.filter(name="smoke").first()
        self.fields["suite"].initial = smoke.pk if smoke else None
        self.endpoints: dict[str, Endpoint] = {}

    def endpoint(self, tier: str) -> Endpoint:
        """The tier's endpoint as typed, unsaved (Test connection sends to it as it is)."""
        data = self.cleaned_data
        typed = {
            "base_url": (data.get(f"{tier}_base_url") or "").strip(),
            "model": (data.get(f"{tier}_model") or "").strip(),
            "api_key_env": (data.get(f"{tier}_key_env") or "").strip(),
        }
        return Endpoint(
            name=f"{data.get('name') or 'new'}-{tier}",
            local=bool(data.get("local")),
            **preset_fields(data.get("preset") or "openai", tier, typed),
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        name = data.get("name")
        if name == "add":  # /pairs/add/ is this page
            self.add_error("name", "'add' names the add-a-pair page; choose another name")
        elif name and Pair.objects.filter(name=name).exists():
            self.add_error("name", f"a pair named {name!r} exists already")
        if not self.may_mark_local and forms.BooleanField().to_python(self.data.get("local")):
            self.add_error(
                None,
                "self-hosted: only an admin may add an endpoint on this machine or network "
                "(http:// or a private address); nothing was tested or saved",
            )
            return data
        for tier in TIERS:
            endpoint = self.endpoint(tier)
            try:
                endpoint.full_clean()
            except ValidationError as exc:
                self._endpoint_errors(tier, exc)
                continue
            self.endpoints[tier] = endpoint
        if len(self.endpoints) == 2 and self.cleaned_data.get("name"):
            self._check_pair(data)
        return data

    def _endpoint_errors(self, tier: str, exc: ValidationError) -> None:
        for field, messages in exc.message_dict.items():
            target = ENDPOINT_FIELDS.get(field)
            if target is not None and f"{tier}_{target}" in self.fields:
                if f"{tier}_{target}" not in self.errors:
                    self.add_error(f"{tier}_{target}", messages)
            elif field == "name":  # <pair>-<tier> taken by another endpoint
                self.add_error("name", [f"{tier} endpoint: {m}" for m in messages])
            else:
                self.add_error(None, [f"{tier} {field}: {m}" for m in messages])

    def _check_pair(self, data: dict[str, Any]) -> None:
        pair = Pair(
            name=data["name"],
            suite=data.get("suite"),
            repeat=data.get("repeat") or 2,
            fast=self.endpoints["fast"],
            base=self.endpoints["base"],
        )
        try:
            pair.full_clean(exclude=["fast", "base"], validate_unique=False)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, messages)

    def every_s(self) -> dict[str, int | None]:
        minutes = self.cleaned_data.get("probe_every_minutes")
        hours = self.cleaned_data.get("audit_every_hours")
        return {
            "probe": minutes * 60 if minutes else None,
            "audit": hours * 3600 if hours else None,
        }

    @transaction.atomic
    def save(self, *, user: Any) -> Pair:
        """Endpoints, pair, schedules and the "outputs differ" rule, or nothing; each row in
        the audit log."""
        source = "add pair page"
        for endpoint in self.endpoints.values():
            endpoint.save()
            audit.record(
                obj=endpoint, before={}, after=audit.snapshot(endpoint), source=source, user=user
            )
        data = self.cleaned_data
        pair = Pair.objects.create(
            name=data["name"],
            fast=self.endpoints["fast"],
            base=self.endpoints["base"],
            suite=data["suite"],
            repeat=data["repeat"],
            **preset_claim(data.get("preset") or ""),
        )
        audit.record(obj=pair, before={}, after=audit.snapshot(pair), source=source, user=user)
        for row, before in pair_defaults.set_schedules(pair, self.every_s()):
            after = audit.snapshot(row)
            audit.record(obj=row, before=before, after=after, source=source, user=user)
        pair_defaults.ensure_outputs_differ_rule(pair)
        return pair
