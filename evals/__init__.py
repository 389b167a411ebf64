"""tierwatch's science: measuring, comparing and judging LLM tiers.

Plain Python over plain data. Nothing here imports Django or ``monitor``: a data scientist can
use every function from a script or a notebook.
"""
