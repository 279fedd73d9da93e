"""The in-cluster controller: admission, the check loop, leader election, health and
metrics.
"""
