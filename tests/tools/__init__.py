"""Tools the tests run: checkers with their own unit tests beside them.

A package so that any suite can import them (``from tools.rbac_scan import check``):
tests/ is on ``sys.path`` through its conftest.
"""
