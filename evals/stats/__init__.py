"""The statistics behind every verdict, speed-up claim and drift alert.

- ``mmd`` — two-sample MMD test, per-prompt Hamming kernel, permutation within prompts.
- ``sequential`` — the anytime-valid version of that test, by betting.
- ``capability`` — paired pass/fail (McNemar), pass@k.
- ``capability_paired`` — per-case pass counts over a window of runs: stratified permutation
  test per category, Holm, minimum detectable drop, routing advice.
- ``speedup`` — paired bootstrap confidence intervals of "how many times faster".
- ``multiple`` — Holm and Benjamini–Hochberg adjusted p-values.
- ``verdict`` — the label and sentence a pair's run ends with (``decide``, grading by ladder;
  being replaced by ``labels.judge``).
- ``labels`` — honest labels: outputs differ / no detectable difference (80% power) /
  capability difference (the run's own cases) / inconclusive; empties and failures as rates.
- ``effect`` — MMD² interval over prompts and the effect detectable at 80% power.
- ``textprep`` — NFC + stripped texts, empty answers counted apart.
- ``eprocess`` — evidence across audits: e-values, e-detector with an error budget, e-BH.
- ``cusum`` — frozen baseline and online one-sided CUSUM state, h from a target ARL0.
- ``error_budget`` — the budget per pair per quarter and the settings derived from it (series,
  baseline size, e-detector threshold, ARL0): one place for the product and the benchmark.
- ``speedup_runs`` — cluster bootstrap over runs, failures censored, claim status.
- ``stability`` — base now against base in an earlier run (the A-vs-A that can fail).

Pure functions over plain data (numpy arrays, dicts, dataclasses); each formula is written
once, with its source in the docstring. ``scipy`` is imported inside the functions that call
it: importing ``scipy.stats`` costs more than the rest of a Django start, and every
``manage.py`` command and Celery worker imports these modules through the URLs and tasks,
most of them without computing a statistic.
"""
