"""Key-value buckets on JetStream: the bucket and its operations (``bucket``), names and
settings (``config``), watchers (``watch``) and reading many keys at once (``many``).
"""
