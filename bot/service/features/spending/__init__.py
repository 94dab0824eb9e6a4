"""`/debate estimate`: what a debate would cost."""
