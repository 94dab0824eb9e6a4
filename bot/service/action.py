"""`debate-bot action`: the bot inside one GitHub Actions job, no service to host.

The job's event is handled exactly as the service handles a webhook delivery:
the router's pre-filter, then the same handlers (triggers, commands, permission
checks, repo config, markers, sanitization), then every run it started is
driven to its end in the job, with a SQLite store in ``RUNNER_TEMP``. The job
token (``GITHUB_TOKEN``) stands in for the installation token, so comments
arrive as ``github-actions[bot]``. Runs are named after the workflow run, and
a re-run (``GITHUB_RUN_ATTEMPT`` > 1) looks up its comments by marker first:
it edits them instead of posting new ones.

Exit codes: 0 the outcome was posted (or there was nothing to do), 1 a run
failed (after its failure notice), 2 a bad setup, with the fix named.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import ConfigError
from bot.core.explain import FAILURE, OK
from bot.core.logs import get_logger
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.models.router import ModelRouter
from bot.repo.github import GitHubReader
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.features.table import build_triggers
from bot.service.worker.context import Origin, Services
from bot.service.worker.pool import Worker
from bot.service.worker.routes import TriggerTable
from bot.store import RunStore

log = get_logger(__name__)

EXIT_DONE, EXIT_FAILED = OK, FAILURE  # a bad setup is a ConfigError: the CLI exits 2
# Actions payloads carry no installation; the job token speaks for the one repository.
JOB_INSTALLATION = 0
WORKER_ID = "actions-job"


@dataclass(frozen=True)
class Job:
    event: str
    payload: dict[str, object]
    token: str
    api_url: str
    repository: str
    run_id: str
    attempt: int
    temp: Path
    workspace: Path | None = None  # the job's checkout (GITHUB_WORKSPACE), if any

    @property
    def delivery_id(self) -> str:
        # Marker-safe: a workflow run id is unique within its repository.
        repo = hashlib.sha256(self.repository.encode()).hexdigest()[:8]
        return f"actions-{repo}-{self.run_id}"


def read_job(env: Mapping[str, str]) -> Job:
    """The job's event and token from the runner's environment; a ConfigError
    names what is missing and how to fix it."""
    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise ConfigError(
            "GITHUB_TOKEN is not set: give the action `github-token: ${{ github.token }}` "
            "(its default) and the job `permissions:` issues: write, pull-requests: write"
        )
    event, path = env.get("GITHUB_EVENT_NAME", ""), env.get("GITHUB_EVENT_PATH", "")
    if not event or not path:
        raise ConfigError(
            "GITHUB_EVENT_NAME or GITHUB_EVENT_PATH is not set: `debate-bot action` runs "
            "inside a GitHub Actions job (see docs/github-action.md)"
        )
    try:
        payload = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"GITHUB_EVENT_PATH {path}: cannot be read ({exc.strerror})") from None
    except ValueError:
        raise ConfigError(f"GITHUB_EVENT_PATH {path}: not a JSON event") from None
    if not isinstance(payload, dict):
        raise ConfigError(f"GITHUB_EVENT_PATH {path}: not a JSON object")
    temp = Path(env.get("RUNNER_TEMP") or ".")
    try:
        attempt = int(env.get("GITHUB_RUN_ATTEMPT") or 1)
    except ValueError:
        attempt = 1
    return Job(
        event=event,
        payload=payload,
        token=token,
        api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
        repository=env.get("GITHUB_REPOSITORY", ""),
        run_id=env.get("GITHUB_RUN_ID") or "local",
        attempt=attempt,
        temp=temp,
        workspace=Path(env["GITHUB_WORKSPACE"]) if env.get("GITHUB_WORKSPACE") else None,
    )


def job_settings(base: Settings, job: Job) -> Settings:
    """The service's settings (model keys and defaults from the environment) with
    the job's store and GitHub API."""
    return base.model_copy(
        update={
            "database_url": f"sqlite:///{job.temp / 'debate-bot.sqlite'}",
            "github_api_url": job.api_url,
        }
    )


async def run_job(settings: Settings, job: Job) -> int:
    routes = build_triggers()
    payload = {**job.payload, "installation": {"id": JOB_INSTALLATION}}
    reason = DELIVERY_FILTER.prefilter(job.event, payload)
    if reason is not None:
        log.info("action.nothing_to_do", reason=reason)
        return EXIT_DONE
    store = RunStore.from_url(settings.database_url)
    store.migrate()
    try:
        store.record_delivery(
            job.delivery_id,
            job.event,
            str(payload.get("action") or ""),
            JOB_INSTALLATION,
            json.dumps(payload),
        )
        async with GitHubGateway(settings, actions_token=job.token) as gateway:
            svc = Services(
                settings,
                store,
                gateway,
                ModelRouter(settings),
                Metrics(),
                new_run_id=lambda origin: _run_id(job, origin),
                resume_comments=job.attempt > 1,
                repos=GitHubReader.from_settings(
                    cache_mb=settings.repo_snapshot_cache_mb,
                    archive_max_mb=settings.repo_archive_max_mb,
                    timeout_s=settings.repo_fetch_timeout_s,
                    checkout=job.workspace,
                ),
            )
            try:
                return await _drain(svc, store, job, routes)
            finally:
                await svc.models.aclose()
    finally:
        store.dispose()


async def _drain(svc: Services, store: RunStore, job: Job, routes: TriggerTable) -> int:
    """The job's delivery, then every run it (or a finished run's queue) started."""
    worker = Worker(svc, routes, worker_id=WORKER_ID)
    lease = svc.settings.lease_s
    while (row := store.claim_delivery(WORKER_ID, lease)) is not None:
        await worker.process_delivery(row)
    failed = False
    while (run := store.claim_run(WORKER_ID, lease)) is not None:
        await worker.drive(run)
        final = store.get_run(run.id)
        failed = failed or (final is not None and final.state in ("failed", "aborted"))
    delivery = store.get_delivery(job.delivery_id)
    if delivery is not None and delivery.state == "failed":
        log.warning("action.delivery_failed", error=delivery.error_class)
        failed = True
    return EXIT_FAILED if failed else EXIT_DONE


def _run_id(job: Job, origin: Origin) -> str:
    """Stable across re-runs of the job: the comments' markers name it."""
    seed = f"{job.delivery_id}|{origin.repo}#{origin.issue_number}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]
