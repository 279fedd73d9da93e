"""Adapters to the outside world: the libraries that speak to clusters and engines,
and the local file system the tool writes to.

One module per library (kubernetes, docker): the rest of artifactcheck never imports
them, so their errors are translated into the model's taxonomy in one place.
"""
