"""`debate-bot eval`: what a configuration (one model, a vote, a debate) is worth
on labelled cases: accuracy with its interval, cost and time, side by side.

``cases`` (case files), ``configs`` (what to compare), ``material`` (specs and
prompts for a case), ``debate`` (the engine loop), ``answer`` (one case under
one configuration), ``cache`` (resume), ``run`` (the bounded, budgeted run),
``stats``, ``report``, ``plot``, ``harvest`` (cases from a repository's
history) and ``cli``. See docs/configuration.md, "debate-bot eval".
"""
