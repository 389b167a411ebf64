"""Multi-turn agent tasks: records, the sandboxed environment, the agent loop and its score.

``records`` holds the dataclasses; ``environment`` runs a task's BFCL environment in the
sandbox; ``loop`` plays one episode through the client; ``score`` checks it as BFCL does.
"""
