"""What every stage shares: the values that flow between stages, the check's settings,
version grammar and the one error taxonomy. Imports nothing of artifactcheck.
"""
