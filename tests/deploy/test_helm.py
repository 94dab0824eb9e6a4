"""The Helm chart in deploy/helm/debate-bot, linted and rendered by the real Helm
library (helm-python-sdk embeds Helm's Go SDK; no helm binary, no cluster), and
checked against the code: commands, settings, routes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.main import create_app, create_ops_app
from bot.store import RunStore
from testkit.harness.deploy import cli_commands, settings_env_names

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "debate-bot"
RELEASE = "rel"
KEY_FILE = "/var/run/debate-bot/private-key.pem"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"

ALL_SECRETS = {
    "secret": {
        "appId": "12345",
        "privateKey": PEM,
        "webhookSecret": "whsec",
        "databaseUrl": "postgresql://bot:pw@db:5432/bot",
        "openaiApiKey": "sk-o",
        "anthropicApiKey": "sk-a",
        "endpoints": {"local": {"kind": "openai", "base_url": "http://llm:8000/v1"}},
    },
    "config": {
        "defaultModel": "openai/gpt-4.1-mini",
        "defaultModels": ["openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5"],
        "openaiBaseUrl": "http://llm:8000/v1",
        "anthropicBaseUrl": "https://api.anthropic.com",
        "extra": {"DEBATE_BOT_WORKER_CONCURRENCY": "8"},
    },
}
EVERYTHING_ON = {
    "existingSecret": "my-debate-bot",
    "ingress": {"enabled": True, "className": "nginx"},
    "worker": {"autoscaling": {"enabled": True}},
    "serviceMonitor": {"enabled": True},
}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "all-secrets": ALL_SECRETS,
    "everything-on": EVERYTHING_ON,
}


# --- what the code says is real ----------------------------------------------------


@pytest.fixture(scope="module")
def app_routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    db = tmp_path_factory.mktemp("helm") / "db.sqlite"
    store = RunStore.from_url(f"sqlite:///{db}")
    app = create_app(Settings(), store, Metrics(), deliveries=DELIVERY_FILTER)
    yield {getattr(r, "path", "") for r in app.routes}
    store.dispose()


@pytest.fixture(scope="module")
def ops_routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """What a worker serves on DEBATE_BOT_WORKER_PORT."""
    db = tmp_path_factory.mktemp("helm") / "db.sqlite"
    store = RunStore.from_url(f"sqlite:///{db}")
    app = create_ops_app(store, Metrics())
    yield {getattr(r, "path", "") for r in app.routes}
    store.dispose()


# --- rendering ------------------------------------------------------------------------


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=RELEASE, namespace="ns", is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in manifests.items():
        if not path.endswith((".yaml", ".yml")):
            continue  # NOTES.txt, _helpers.tpl
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of_kind(docs, "Deployment") + of_kind(docs, "Job")


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc)
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def env_names_of(docs: list[dict[str, Any]]) -> set[str]:
    """Every variable a pod gets: env entries, ConfigMap keys (envFrom), and the
    keys of any Secret pulled in whole with envFrom."""
    config_maps = {d["metadata"]["name"]: d for d in of_kind(docs, "ConfigMap")}
    secrets = {d["metadata"]["name"]: d for d in of_kind(docs, "Secret")}
    names: set[str] = set()
    for doc in workloads(docs):
        for c in containers(doc):
            names.update(e["name"] for e in c.get("env", []))
            for src in c.get("envFrom", []):
                if "configMapRef" in src:
                    cm = config_maps[src["configMapRef"]["name"]]
                    names.update(cm.get("data") or {})
                if "secretRef" in src:
                    s = secrets.get(src["secretRef"]["name"])
                    if s is not None:
                        names.update(s.get("stringData") or {})
                        names.update(s.get("data") or {})
    return names


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(VALUE_SETS[request.param])


# --- lint -------------------------------------------------------------------------------


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_helm_lint_is_clean(values: str) -> None:
    report = helm.lint(CHART, VALUE_SETS[values], strict=True, kube_version="v1.29.0")
    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # warning, error
    assert problems == []


# --- the chart against the code ---------------------------------------------------------


def test_every_container_runs_a_real_cli_command(rendered) -> None:
    _, docs = rendered
    commands = cli_commands()
    seen = set()
    for doc in workloads(docs):
        for c in containers(doc):
            assert "command" not in c, "the image's ENTRYPOINT is debate-bot"
            assert c["args"][0] in commands, (doc["metadata"]["name"], c["args"])
            seen.add(c["args"][0])
    assert seen == {"web", "worker", "migrate"}


def test_every_variable_is_a_real_setting(rendered) -> None:
    _, docs = rendered
    unknown = env_names_of(docs) - settings_env_names()
    assert unknown == set()


def test_secret_keys_are_real_settings_and_refs_resolve() -> None:
    docs = render(ALL_SECRETS)
    known = settings_env_names()
    secrets = {d["metadata"]["name"]: d["stringData"] for d in of_kind(docs, "Secret")}
    assert set(secrets) == {f"{RELEASE}-debate-bot", f"{RELEASE}-debate-bot-migrate"}
    main = secrets[f"{RELEASE}-debate-bot"]
    assert set(main) - {"private-key.pem"} <= known
    assert main["private-key.pem"] == PEM
    assert main["DEBATE_BOT_APP_ID"] == "12345"
    # Every referenced key exists once every secret value is set.
    for doc in workloads(docs):
        for c in containers(doc):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]], (doc["metadata"]["name"], ref)


def test_the_env_check_catches_an_unknown_name() -> None:
    docs = render({"config": {"extra": {"DEBATE_BOT_NOT_A_SETTING": "1"}}})
    assert env_names_of(docs) - settings_env_names() == {"DEBATE_BOT_NOT_A_SETTING"}


def test_probes_and_scrapes_hit_real_routes(
    rendered, app_routes: set[str], ops_routes: set[str]
) -> None:
    name, docs = rendered
    web = one(docs, "Deployment", f"{RELEASE}-debate-bot-web")
    (c,) = containers(web)
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    paths = {c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]}
    for sm in of_kind(docs, "ServiceMonitor"):
        paths.update(ep["path"] for ep in sm["spec"]["endpoints"])
    (w,) = containers(one(docs, "Deployment", f"{RELEASE}-debate-bot-worker"))
    worker_paths = {w["livenessProbe"]["httpGet"]["path"]}
    for pm in of_kind(docs, "PodMonitor"):
        worker_paths.update(ep["path"] for ep in pm["spec"]["podMetricsEndpoints"])
    assert worker_paths <= ops_routes
    for ing in of_kind(docs, "Ingress"):
        for rule in ing["spec"]["rules"]:
            paths.update(p["path"] for p in rule["http"]["paths"])
    assert paths <= app_routes
    if name == "everything-on":
        assert "/metrics" in paths and "/api/github/webhooks" in paths


def test_web_listens_on_the_configured_port() -> None:
    docs = render({"config": {"port": 8123}})
    cm = one(docs, "ConfigMap", f"{RELEASE}-debate-bot")
    assert cm["data"]["DEBATE_BOT_PORT"] == "8123"
    assert cm["data"]["DEBATE_BOT_HOST"] == "0.0.0.0"
    (c,) = containers(one(docs, "Deployment", f"{RELEASE}-debate-bot-web"))
    assert c["ports"] == [{"name": "http", "containerPort": 8123, "protocol": "TCP"}]
    svc = one(docs, "Service", f"{RELEASE}-debate-bot")
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "web"


def test_workers_serve_probes_and_metrics_but_no_webhooks(rendered) -> None:
    name, docs = rendered
    (c,) = containers(one(docs, "Deployment", f"{RELEASE}-debate-bot-worker"))
    assert c["args"] == ["worker"]
    assert c["ports"] == [{"name": "metrics", "containerPort": 9000, "protocol": "TCP"}]
    assert {"name": "DEBATE_BOT_WORKER_PORT", "value": "9000"} in c["env"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    for svc in of_kind(docs, "Service"):  # no webhook reaches a worker
        assert svc["spec"]["selector"].get("app.kubernetes.io/component") != "worker"
    monitors = of_kind(docs, "PodMonitor")
    if name != "everything-on":
        assert monitors == []
        return
    (pm,) = monitors
    assert pm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


def test_migrations_are_a_pre_install_pre_upgrade_hook(rendered) -> None:
    name, docs = rendered
    job = one(docs, "Job", f"{RELEASE}-debate-bot-migrate")
    ann = job["metadata"]["annotations"]
    assert set(ann["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    policy = set(ann["helm.sh/hook-delete-policy"].split(","))
    assert policy == {"before-hook-creation", "hook-succeeded"}
    (c,) = containers(job)
    assert c["args"] == ["migrate"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    # A pre-install hook runs before the release's ordinary resources exist: it
    # may read only hook resources (or the user's own Secret).
    assert "envFrom" not in c
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in c["env"] if "valueFrom" in e}
    for ref in refs:
        if name == "everything-on":
            assert ref == "my-debate-bot"
        else:
            s = one(docs, "Secret", ref)
            assert "pre-install" in s["metadata"]["annotations"]["helm.sh/hook"]
            assert int(s["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
                ann.get("helm.sh/hook-weight", "0")
            )


def test_pods_are_locked_down(rendered) -> None:
    _, docs = rendered
    for doc in workloads(docs):
        spec = pod_spec(doc)
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True
        assert spec.get("automountServiceAccountToken") is False
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in containers(doc):
            sc = c["securityContext"]
            where = (doc["metadata"]["name"], c["name"])
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert "ALL" in sc["capabilities"]["drop"], where
            assert not sc["capabilities"].get("add"), where
            assert sc.get("privileged", False) is False, where
            seccomp = sc.get("seccompProfile") or pod_sc.get("seccompProfile")
            assert seccomp == {"type": "RuntimeDefault"}, where
            assert c["resources"]["requests"] and c["resources"]["limits"], where
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]], where


def test_the_private_key_is_a_file(rendered) -> None:
    name, docs = rendered
    secret = "my-debate-bot" if name == "everything-on" else f"{RELEASE}-debate-bot"
    for component in ("web", "worker"):
        dep = one(docs, "Deployment", f"{RELEASE}-debate-bot-{component}")
        (c,) = containers(dep)
        env = {e["name"]: e for e in c["env"]}
        assert env["DEBATE_BOT_PRIVATE_KEY_FILE"]["value"] == KEY_FILE
        assert "DEBATE_BOT_PRIVATE_KEY" not in env  # never the PEM in a variable
        mount = next(m for m in c["volumeMounts"] if KEY_FILE.startswith(m["mountPath"] + "/"))
        assert mount["readOnly"] is True
        vol = next(v for v in pod_spec(dep)["volumes"] if v["name"] == mount["name"])
        assert vol["secret"]["secretName"] == secret
        item = vol["secret"]["items"][0]
        assert f"{mount['mountPath']}/{item['path']}" == KEY_FILE
        assert env["DEBATE_BOT_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == secret
        assert "optional" not in env["DEBATE_BOT_DATABASE_URL"]["valueFrom"]["secretKeyRef"]


def test_existing_secret_renders_no_secret_of_ours() -> None:
    docs = render(EVERYTHING_ON)
    assert of_kind(docs, "Secret") == []
    for doc in workloads(docs):
        spec = pod_spec(doc)
        for v in spec.get("volumes", []):
            if "secret" in v:
                assert v["secret"]["secretName"] == "my-debate-bot"
        for c in containers(doc):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == "my-debate-bot"


def test_termination_grace_period_is_a_value(rendered) -> None:
    _, docs = rendered
    deployments = of_kind(docs, "Deployment")
    assert len(deployments) == 2
    for dep in deployments:
        assert pod_spec(dep)["terminationGracePeriodSeconds"] == 30
    for dep in of_kind(render({"terminationGracePeriodSeconds": 75}), "Deployment"):
        assert pod_spec(dep)["terminationGracePeriodSeconds"] == 75


def test_kubernetes_waits_out_the_workers_drain() -> None:
    # SIGKILL must not land before the drain (grace) plus a margin to store turns
    # and release leases; the chart's grace must be the bot's default.
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    grace = values["config"]["shutdownGraceS"]
    assert grace == Settings().shutdown_grace_s
    assert values["terminationGracePeriodSeconds"] >= grace + 5
    docs = render({})
    (cm,) = of_kind(docs, "ConfigMap")
    assert float(cm["data"]["DEBATE_BOT_SHUTDOWN_GRACE_S"]) == grace
    for dep in of_kind(docs, "Deployment"):
        assert pod_spec(dep)["terminationGracePeriodSeconds"] >= grace + 5
    with pytest.raises(Exception, match="shutdownGraceS"):
        render({"terminationGracePeriodSeconds": 30, "config": {"shutdownGraceS": 28}})


def test_defaults_and_optional_parts() -> None:
    chart_meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart_meta["apiVersion"] == "v2"
    docs = render({})
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"Ingress", "HorizontalPodAutoscaler", "ServiceMonitor", "PodMonitor"}
    worker = one(docs, "Deployment", f"{RELEASE}-debate-bot-worker")
    assert worker["spec"]["replicas"] == 2
    for dep in of_kind(docs, "Deployment"):
        (c,) = containers(dep)
        assert c["image"].endswith(f":{chart_meta['appVersion']}")
    pdbs = {
        d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
        for d in of_kind(docs, "PodDisruptionBudget")
    }
    assert pdbs == {"web", "worker"}

    on = render(EVERYTHING_ON)
    worker = one(on, "Deployment", f"{RELEASE}-debate-bot-worker")
    assert "replicas" not in worker["spec"]  # the HPA owns it
    hpa = one(on, "HorizontalPodAutoscaler", f"{RELEASE}-debate-bot-worker")
    assert hpa["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    ing = one(on, "Ingress", f"{RELEASE}-debate-bot")
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == one(on, "Service", f"{RELEASE}-debate-bot")["metadata"]["name"]
    assert one(on, "ServiceMonitor", f"{RELEASE}-debate-bot")["spec"]["endpoints"][0]["port"] == (
        "http"
    )
    tagged = render({"image": {"repository": "example/bot", "tag": "9.9.9"}})
    for dep in of_kind(tagged, "Deployment"):
        assert containers(dep)[0]["image"] == "example/bot:9.9.9"


@pytest.mark.parametrize("app_id", [1234567, "1234567"])
def test_a_numeric_app_id_stays_an_integer(app_id: object) -> None:
    # Helm holds numbers as float64: a plain toString would give "1.234567e+06".
    docs = render({"secret": {"appId": app_id}})
    data = one(docs, "Secret", f"{RELEASE}-debate-bot")["stringData"]
    assert data["DEBATE_BOT_APP_ID"] == "1234567"
    assert Settings(app_id=data["DEBATE_BOT_APP_ID"]).app_id == 1234567


# --- values people set, and the Kubernetes API ------------------------------------

# The oldest and newest Kubernetes minor versions the chart supports (Chart.yaml
# kubeVersion), by the API schemas kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.29.0", "1.35.0")

# Values as `helm install --set …` gives them: a list given by index replaces the
# whole list of values.yaml (the ingress host without its paths, say).
COMMON_SETS: dict[str, dict[str, Any]] = {
    "--set ingress.hosts[0].host": {
        "ingress": {"enabled": True, "hosts": [{"host": "bot.example.com"}]}
    },
    "ingress with tls and a class": {
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "hosts": [{"host": "bot.example.com", "paths": [{"path": "/api/github/webhooks"}]}],
            "tls": [{"secretName": "bot-tls", "hosts": ["bot.example.com"]}],
        }
    },
    "own image and pull secret": {
        "image": {"repository": "registry.example.com/you/debate-bot", "tag": "0.1.0"},
        "imagePullSecrets": [{"name": "my-registry"}],
    },
    "autoscaled workers": {"worker": {"autoscaling": {"enabled": True, "maxReplicas": 4}}},
    "load balancer": {"service": {"type": "LoadBalancer"}},
    "one replica, no PDB": {"web": {"replicas": 1, "pdb": {"enabled": False}}},
    "from setup's .env": ALL_SECRETS,
    "existing secret": {"existingSecret": "my-debate-bot"},
    "agent seats": {"agents": {"enabled": True}},
}


@pytest.mark.parametrize("name", sorted(COMMON_SETS))
def test_common_values_render_manifests_the_api_accepts(name: str) -> None:
    import kubernetes_validate

    docs = render(COMMON_SETS[name])
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # Prometheus Operator CRDs: not in the core API schemas
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 5


def test_an_ingress_host_set_alone_gets_the_webhook_path() -> None:
    [ingress] = of_kind(render(COMMON_SETS["--set ingress.hosts[0].host"]), "Ingress")
    [rule] = ingress["spec"]["rules"]
    assert rule["http"]["paths"][0]["path"] == "/api/github/webhooks"
    assert rule["http"]["paths"][0]["pathType"] == "Exact"


@pytest.mark.parametrize(
    "values",
    [
        {"ingres": {"enabled": True}},  # a typo of a key
        {"web": {"replicas": "two"}},
        {"image": {"pullPolicy": "Sometimes"}},
        {"config": {"extra": {"WORKER_CONCURRENCY": "8"}}},  # not a setting's name
        {"ingress": {"enabled": True, "hosts": [{"paths": [{"path": "/"}]}]}},  # no host
    ],
)
def test_the_chart_refuses_values_its_schema_does_not_allow(values: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="schema"):
        render(values)


def test_the_schema_accepts_the_defaults_and_the_validator_catches_a_broken_manifest() -> None:
    import kubernetes_validate

    docs = render({})
    [web] = [d for d in workloads(docs) if d["metadata"]["name"].endswith("-web")]
    broken = {**web, "spec": {**web["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


def test_agent_seats_give_workers_the_agents_image_and_what_bubblewrap_needs() -> None:
    docs = render({"agents": {"enabled": True}, "image": {"tag": "1.2.3"}})
    deployments = {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}
    worker = deployments[f"{RELEASE}-debate-bot-worker"]
    web = deployments[f"{RELEASE}-debate-bot-web"]
    (container,) = containers(worker)
    assert container["image"].endswith(":1.2.3-agents")
    sc = container["securityContext"]
    assert sc["seccompProfile"] == {"type": "Unconfined"} and sc["procMount"] == "Unmasked"
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert "ALL" in sc["capabilities"]["drop"] and not sc["capabilities"].get("add")
    assert pod_spec(worker)["hostUsers"] is False
    annotations = worker["spec"]["template"]["metadata"]["annotations"]
    assert annotations["container.apparmor.security.beta.kubernetes.io/worker"] == "unconfined"
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(worker)["volumes"]}
    assert "emptyDir" in volumes[mounts[env["DEBATE_BOT_AGENT_DIR"]]]
    # The web tier runs no agent: locked down as ever, the default image.
    (web_container,) = containers(web)
    assert web_container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert web_container["image"].endswith(":1.2.3") and "hostUsers" not in pod_spec(web)
    # Off (the default): the workers are exactly as before.
    plain = {d["metadata"]["name"]: d for d in of_kind(render({}), "Deployment")}
    (plain_worker,) = containers(plain[f"{RELEASE}-debate-bot-worker"])
    assert "procMount" not in plain_worker["securityContext"]
