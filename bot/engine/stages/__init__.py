"""The stages of a replay, in run order: frame, rounds (per tier), adjudication
(proposal stalemates), synthesis.

Each stage is a function ``(RunView, Inputs) -> RunView``. It reads the turns of
its requests from ``Inputs``; when one is missing it returns the view with
``stop`` set to the batch of requests still missing, and the replay ends there.
Every stage's requests depend only on the turns of earlier stages, so a partial
batch (a crash mid-batch) resumes with exactly the requests still missing.
"""
