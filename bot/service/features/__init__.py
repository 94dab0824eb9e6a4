"""The bot's features, one package each: ``triggers`` declares as data which
deliveries it acts on (read by the web tier through ``declared``), ``handlers``
binds its handlers to those declarations and registers its commands, queued
work, end-of-run actions and loops (composed by ``table``)."""
