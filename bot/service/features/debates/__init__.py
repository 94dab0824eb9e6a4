"""Debates, decisions and the plain commands (`/debate`, `help`, `status`, `cancel`, `decide`)."""
