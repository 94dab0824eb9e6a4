"""Loopback fakes of the services debate-bot talks to."""
