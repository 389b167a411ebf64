"""The statistics behind every verdict, speed-up claim and drift alert.

- ``mmd`` — two-sample MMD test, per-prompt Hamming kernel, permutation within prompts.
- ``sequential`` — the anytime-valid version of that test, by betting.
- ``capability`` — paired pass/fail (McNemar), pass@k.
- ``capability_paired`` — per-case pass counts over a window of runs: stratified permutation
  test per category, Holm, minimum detectable drop, routing advice.
- ``speedup`` — paired bootstrap confidence intervals of "how many times faster".
- ``drift`` — per-run z-scores against a frozen baseline, two-sided CUSUM with hysteresis.
- ``multiple`` — Holm and Benjamini–Hochberg adjusted p-values.
- ``verdict`` — the label and sentence a pair's run ends with.

Pure functions over plain data (numpy arrays, dicts, dataclasses); each formula is written
once, with its source in the docstring.
"""
