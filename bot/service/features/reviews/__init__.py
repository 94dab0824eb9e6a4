"""Design reviews of plans, folders and repositories."""
