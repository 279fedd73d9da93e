"""The only way to the instances and CDNs being checked: URL safety, the HTTP transport,
TLS certificate reads and the fetcher with its retry budget.
"""
