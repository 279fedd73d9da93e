"""Adapters to the outside libraries that speak to clusters and engines.

One module per library (kubernetes, docker): the rest of artifactcheck never imports
them, so their errors are translated into the model's taxonomy in one place.
"""
