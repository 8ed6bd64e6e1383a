"""Long-running checks behind ``make reliability``, ``make soak`` and ``make fuzz``.

Run them as modules from the repository root (``python -m tools.soak --help``): they share
``tools._streamcheck`` (the numbered stream and its loss accounting) and
``tools._reliability_doc`` (their sections of docs/RELIABILITY.md).
"""
