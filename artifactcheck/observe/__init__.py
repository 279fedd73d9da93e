"""Observing an instance: fetch what it serves (manifest, assets, certificate) and what
the CDN serves, and record it as observations for the judge.
"""
