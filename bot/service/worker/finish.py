"""The end of a run on GitHub: final comment, reactions, labels, stored state."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from bot.core.errors import BotError
from bot.core.logs import get_logger
from bot.engine.types import Outcome
from bot.github.gateway import InstallationClient
from bot.github.sanitize import sanitize
from bot.service.worker.budgets import with_ledger_cost
from bot.service.worker.context import Services
from bot.service.worker.publish import Publisher, file_issue_once
from bot.service.worker.routes import FinishAction, Finished
from bot.store.rows import RunRow

log = get_logger(__name__)

RUNNING, DONE, FAILED = "debate:running", "debate:done", "debate:failed"
PROPOSAL_ISSUE = "proposal-issue"  # store key of the filed [PROPOSAL] issue


@dataclass
class Finisher:
    svc: Services
    gh: InstallationClient
    run: RunRow
    publisher: Publisher
    # Starts the work queued behind this run (the router's continue_queue).
    continue_queue: Callable[[InstallationClient, RunRow], Awaitable[None]]
    # The features' end-of-run actions (the router's finish_actions), in order.
    actions: Sequence[FinishAction] = ()

    async def finish(self, outcome: Outcome, usage: tuple[int, float], worker_id: str) -> None:
        tokens, cost = usage
        # The audit's cost line from the ledger, naming prices assumed or unknown.
        spent = await self.svc.db.run_spend(self.run.id)
        outcome = replace(outcome, body=with_ledger_cost(outcome.body, spent))
        if outcome.kind == "pending_decision":
            await self.publisher.upsert("status", outcome.body)
            await self.svc.db.release_run(
                self.run.id,
                worker_id,
                "waiting",
                outcome_kind=outcome.kind,
                tokens_total=tokens,
                cost_usd=cost,
            )
            return
        if outcome.kind == "aborted":
            await self.publisher.upsert("aborted", outcome.body)
            await self._close(ok=False)
            await self.svc.db.release_run(
                self.run.id,
                worker_id,
                "aborted",
                outcome_kind=outcome.kind,
                error_class=outcome.reason or "aborted",
                tokens_total=tokens,
                cost_usd=cost,
            )
            return
        if outcome.kind == "proposal":
            number = await self._file_proposal(outcome)
            await self.publisher.upsert(
                "proposal-link", f"The panel's proposal is filed as #{number}: **{outcome.title}**"
            )
            await self.publisher.upsert("verdict", outcome.body)
        else:
            await self.publisher.upsert("verdict", outcome.body)
        finished = Finished(self.svc, self.gh, self.run, self.publisher, outcome)
        for action in self.actions:
            await action(finished)
        await self._close(ok=True)
        await self.svc.db.release_run(
            self.run.id,
            worker_id,
            "done",
            outcome_kind=outcome.kind,
            tokens_total=tokens,
            cost_usd=cost,
        )
        if self.run.trigger.queue is not None:  # the next run on this PR may start only now
            try:
                await self.continue_queue(self.gh, self.run)
            except BotError as exc:  # this run is done either way
                log.warning("queue.continue_failed", run=self.run.id, error=exc.code)

    async def failed(
        self, code: str, sentence: str, worker_id: str, *, notice: bool = True
    ) -> None:
        """``notice=False``: the thread is gone or locked, so nothing is posted."""
        # The stored state comes first: a notice GitHub refuses must not leave the
        # run claimable forever.
        if not await self.svc.db.release_run(self.run.id, worker_id, "failed", error_class=code):
            return  # not ours any more (lease lost, or already finished): say nothing
        if not notice:
            return
        try:
            await self.failed_notice(code, sentence)
        except BotError as exc:
            log.warning("run.failure_notice_failed", run=self.run.id, error=exc.code)

    async def failed_notice(self, code: str, sentence: str) -> None:
        await self.publisher.upsert(
            "aborted",
            f"**The debate stopped** (`{code}`). {sentence}\n\n"
            "Details are in the service logs. Comment `/debate` to try again.",
        )
        await self._close(ok=False)

    async def cancelled(self, worker_id: str) -> None:
        if not await self.svc.db.release_run(self.run.id, worker_id, "cancelled"):
            return
        try:
            await self.publisher.upsert(
                "status", "The debate was cancelled. Rounds already posted stay."
            )
            await self._close(ok=False, label=False)
        except BotError as exc:
            log.warning("run.cancel_notice_failed", run=self.run.id, error=exc.code)

    async def _file_proposal(self, outcome: Outcome) -> int:
        """File the [PROPOSAL] issue once, even if the run is resumed after filing it."""
        record = await self.svc.db.comment_id(self.run.id, PROPOSAL_ISSUE)
        if record is not None:
            return record.comment_id
        body = sanitize(
            f"{outcome.body}\n\n---\nFiled by debate-bot from #{self.run.issue_number}."
        )
        title = (
            outcome.title
            if outcome.title.startswith("[PROPOSAL]")
            else f"[PROPOSAL] {outcome.title}"
        )
        number = await file_issue_once(
            self.gh,
            self.run.repo,
            sanitize(title)[:256],
            body,
            key=self.run.id,
            resumed=self.run.attempts > 1,
        )
        digest = hashlib.sha256(body.encode()).hexdigest()
        await self.svc.db.record_comment(self.run.id, PROPOSAL_ISSUE, number, "issue", digest)
        return number

    async def _react(self, content: str) -> None:
        trigger = self.run.trigger
        try:
            if trigger.comment_id:
                await self.gh.add_reaction(
                    self.run.repo,
                    trigger.comment_id,
                    content,
                    review_comment=trigger.review_comment,
                )
            elif not trigger.link_from:
                await self.gh.add_issue_reaction(self.run.repo, self.run.issue_number, content)
        except BotError as exc:
            log.warning("reaction.failed", run=self.run.id, error=exc.code)

    async def _close(self, *, ok: bool, label: bool = True) -> None:
        """Reactions and labels after the outcome is posted: courtesies that must
        never turn a finished run into a failed one."""
        await self._react("rocket" if ok else "confused")
        repo, number = self.run.repo, self.run.issue_number
        try:
            if label:
                await self.gh.add_labels(repo, number, [DONE if ok else FAILED])
                # A stale lifecycle label from an earlier run (known from the
                # trigger, so the happy path pays no extra call).
                stale = FAILED if ok else DONE
                if stale in self.run.trigger.labels:
                    await self.gh.remove_label(repo, number, stale)
            if self.run.trigger.running_label:
                await self.gh.remove_label(repo, number, RUNNING)
        except BotError as exc:
            log.warning("labels.failed", run=self.run.id, error=exc.code)
