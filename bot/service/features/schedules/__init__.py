"""Scheduled repository reviews and what changed since the last one."""
