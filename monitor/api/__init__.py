"""The HTTP API (django-ninja): read endpoints for pairs, runs, samples, verdicts and alerts,
write endpoints for an operator (acknowledge, silence, run now); bearer tokens per user
(``monitor.setup.api_tokens``), the roles' permissions (``monitor.setup.roles``), page-number
pagination, an OpenAPI schema at ``/api/openapi.json`` and its docs at ``/api/docs``."""
