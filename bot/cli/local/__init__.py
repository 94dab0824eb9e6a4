"""The shell of `debate-bot run` and `review`: plan files on disk, the spec, the console.

Two steps around ``bot.run.execute``: ``prepare`` (plan, ``@path`` files,
``.github/debate.yml``, spec; no console, no exit codes, so eval can call it)
and ``console`` (``run_local`` / ``review_local``: progress, transcript, exit
codes). Their parts: ``files`` (finding and reading the plan and its ``@path``
files), ``spec`` (flags + frontmatter + repo config + settings → DebateSpec,
model checks), ``progress`` (the run's hooks: lines on stderr), ``dry_run``
(the planned batches, no model called) and ``log_setup`` (quiet, redacted logs
on stderr while it runs).
"""
