"""JetStream consumers: pull consumers (``consumer``), the pulls they share (``pull``,
``pull_wire``), priority groups (``priority``), the ordered consumer (``ordered``), the
messages they deliver (``msg``) and nats-py's legacy reading names (``compat``).
"""
