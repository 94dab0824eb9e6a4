"""Reading a repository at a pinned commit, read-only: snapshots, their readers
(GitHub, a local checkout) and the debaters' tools.

- ``snapshot``: ``Snapshot`` (index, content held, lazy loads, symlinks) and its bounds
- ``github``: the GitHub reader (git tree + bounded archive, lazy git blobs beyond)
- ``local``: a checkout on disk (``git ls-files``, else a careful walk)
- ``cache``: snapshots shared by a process's runs, one fetch per commit, evicted by size
- ``tools``: ``run_tool`` — ``list_files``, ``read_file``, ``search_code``
- ``search`` (RE2, bounded), ``archive`` (tarball in memory), ``paths`` (what a safe path is)

Imports nothing of ``bot.models``, ``bot.service.worker`` or ``bot.store``
(tests/unit/repo/test_boundaries.py).
"""
