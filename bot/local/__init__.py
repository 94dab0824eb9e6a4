"""The shell of `debate-bot run`: plan files on disk, the spec, the local run loop.

``bot.local_run.run_local`` is the entry point; the modules here hold its parts:
``files`` (finding and reading the plan and its ``@path`` files), ``spec``
(flags + frontmatter + settings → DebateSpec, model checks), ``execute`` (the
run loop with progress), ``dry_run`` (the planned batches, no model called)
and ``log_setup`` (quiet, redacted logs on stderr while it runs).
"""
