"""The pure core: given observations and expectations, each instance's verdict and what to
do about it. No I/O, no clock it was not handed.

Its rooms, in the order a verdict is made (:mod:`~artifactcheck.judge.compare` is the front
door, and re-exports what other packages use):

- ``statuses``, ``prefix``, ``answers``, ``order``: what one answer says (a status, the
  fallback page, where the files are), the index of known releases, sort keys;
- ``served``: what holds before any release (signals, the served manifest, TLS);
- ``release_check``, ``cdn_check``, ``coverage``, ``consensus``: the evidence;
- ``ladder``: the verdict, chosen from the findings already made;
- ``compare``: one instance judged, and the fleet; ``cache``: memoisation for judging a
  fleet again (no rule imports it);
- ``decide``: what to do about the verdicts.
"""
