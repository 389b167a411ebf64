"""Config files the config tests share: ``GOOD`` is a valid file using every section."""

GOOD = """\
endpoints:
  - name: acme-fast
    base_url: https://api.acme.example/v1
    model: acme-large-turbo
    api_key_env: ACME_API_KEY
  - name: acme-base
    protocol: anthropic
    base_url: https://api.acme.example/v1
    model: acme-large
    api_key_env: ACME_API_KEY
    context_window: 200000
suites:
  - name: team-cases
    version: 2
    cases:
      - key: hello
        messages: [{role: user, content: "Say hello"}]
        max_tokens: 16
pairs:
  - name: acme
    fast: acme-fast
    base: acme-base
    suite: team-cases
    claimed_speedup: 6
    repeat: 2
    schedule: {every: 15m, audit_every: 6h}
channels:
  - name: ops
    kind: slack
    target: SLACK_WEBHOOK_OPS
alert_rules:
  - name: acme-ttft
    pair: acme
    metric: ttft_p95
    tier: fast
    op: gt
    threshold: 2000
    channels: [ops]
"""
