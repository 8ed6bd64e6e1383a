"""The object store on JetStream: the bucket and its operations (``store``), names,
settings and records (``config``) and watching a bucket (``watch``).
"""
