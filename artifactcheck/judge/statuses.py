"""What an HTTP status says about a file: one home for each reading.

The judge, the observer's probes and the investigation's table each used to carry
their own copy of these sets, and the copies drifted (a 403 missing on one side, not
on the other) — a verdict and the table explaining it must read an answer the same
way, so every reader imports the set named for what it means.
"""

from __future__ import annotations

#: The file is not there: the server says so.
MISSING = frozenset({404, 410})
#: The instance refuses the file (nginx ``deny`` on dot-paths): browsers cannot get it
#: either, so it is not compared, but it is no evidence of other bytes.
REFUSED = frozenset({403})
#: Not served here, whichever way the server says it: missing, or refused the way S3-style
#: origins and CDNs answer any missing key (and nginx a denied dot-path). What a CDN
#: answering it lacks, and what a probed manifest name answering it is not.
NOT_HERE = MISSING | REFUSED
