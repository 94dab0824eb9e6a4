"""The app removed, suspended or restored on an installation."""
