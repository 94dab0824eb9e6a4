"""Arbitration of a review bot's pull-request comments."""
