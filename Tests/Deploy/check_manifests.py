#!/usr/bin/env python3
"""Offline checks of everything in Deploy/: what a platform team would apply must render, validate and agree with
the server it runs.

    python3 Tests/Deploy/check_manifests.py --kubectl KUBECTL

- every kustomization (base and overlays) renders with KUBECTL (Debian 12's kubectl 1.20: its embedded kustomize
  is the oldest a user may have);
- core kinds validate strictly with kubernetes-validate against a current Kubernetes schema;
- custom kinds (KServe, KEDA, Prometheus Operator) carry the fields we rely on, with the types their published
  specifications give (checked here by hand: no third-party schema files are copied in);
- cross-checks: every OSPREY_* variable is a real `osprey serve` flag, probe paths exist in openapi.yaml, metrics
  named by autoscalers are metrics Osprey exports, selectors match the pods, the grace period covers drain plus
  shutdown, the pods pass Pod Security "restricted";
- the Dockerfile is hadolint-clean; the systemd unit verifies and scores <= 2.5 in `systemd-analyze security`, and
  starts and serves where systemd is PID 1 (skipped with the reason elsewhere).
Prints one PASS/FAIL/SKIP line per check and a closing 'N passed, N failed, N skipped'; exits 1 on any failure.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml
import kubernetes_validate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "Deploy")
results = []
skipped = []


def skip(name, reason):
    skipped.append(name)
    print(f"SKIP {name}: {reason}")


def check(name, ok, detail=""):
    results.append(ok)
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not detail else ": " + detail))


def serve_flags():
    """The flags `osprey serve` accepts, read from its option table."""
    source = open(os.path.join(ROOT, "Sources", "osprey", "ServeCommand.swift")).read()
    table = re.search(r"valueFlags: Set<String> = \[(.*?)\]", source, re.S).group(1)
    flags = set(re.findall(r'"([a-z0-9-]+)"', table))
    booleans = re.search(r"booleanFlags: (\[.*?\])", source, re.S)
    if booleans:
        flags |= set(re.findall(r'"([a-z0-9-]+)"', booleans.group(1)))
    return flags


def exported_metrics():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "Sources", "**", "*.swift"), recursive=True):
        names |= set(re.findall(r'"(osprey_[a-z_]+)"', open(path).read()))
    return names


def spec_paths():
    spec = yaml.safe_load(open(os.path.join(ROOT, "openapi.yaml")))
    return set(spec["paths"])


def get(doc, path):
    """Value at a dotted path ('spec.template.spec'), or None."""
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


# Custom kinds: field -> expected Python type, from the projects' published API references
# (KServe serving.kserve.io v1alpha1 ServingRuntimeSpec and v1beta1 InferenceService, KEDA v1alpha1 ScaledObject,
# prometheus-operator monitoring.coreos.com/v1 ServiceMonitor).
CUSTOM = {
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): {
        "required": {"spec.supportedModelFormats": list, "spec.containers": list, "spec.protocolVersions": list},
        "optional": {"spec.multiModel": bool},
        "allowed_top": {"supportedModelFormats", "containers", "protocolVersions", "multiModel", "disabled",
                        "grpcEndpoint", "grpcDataEndpoint", "httpDataEndpoint", "replicas", "storageHelper",
                        "builtInAdapter", "affinity", "nodeSelector", "tolerations", "volumes", "annotations",
                        "labels", "imagePullSecrets", "workerSpec", "hostIPC"},
    },
    ("serving.kserve.io/v1beta1", "InferenceService"): {
        "required": {"spec.predictor": dict, "spec.predictor.model.modelFormat.name": str},
        "optional": {"spec.predictor.model.runtime": str, "spec.predictor.model.storageUri": str,
                     "spec.predictor.model.protocolVersion": str, "spec.predictor.minReplicas": int,
                     "spec.predictor.maxReplicas": int, "spec.predictor.model.resources": dict},
    },
    ("keda.sh/v1alpha1", "ScaledObject"): {
        "required": {"spec.scaleTargetRef.name": str, "spec.triggers": list},
        "optional": {"spec.minReplicaCount": int, "spec.maxReplicaCount": int, "spec.pollingInterval": int,
                     "spec.cooldownPeriod": int, "spec.scaleTargetRef.apiVersion": str, "spec.scaleTargetRef.kind": str},
    },
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "required": {"spec.selector": dict, "spec.endpoints": list},
        "optional": {},
    },
}


def check_custom(doc, where):
    key = (doc.get("apiVersion"), doc.get("kind"))
    rules = CUSTOM.get(key)
    label = f"{where}: {key[1]}/{get(doc, 'metadata.name')}"
    if rules is None:
        check(label + " is a known kind", False, f"no rules for {key}")
        return
    problems = []
    for path, kind in rules["required"].items():
        value = get(doc, path)
        if not isinstance(value, kind):
            problems.append(f"{path}: expected {kind.__name__}, got {type(value).__name__}")
    for path, kind in rules["optional"].items():
        value = get(doc, path)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            problems.append(f"{path}: expected {kind.__name__}, got {type(value).__name__}")
    if "allowed_top" in rules:
        unknown = set(doc.get("spec", {})) - rules["allowed_top"]
        if unknown:
            problems.append(f"unknown spec fields {sorted(unknown)}")
    if key[1] == "ClusterServingRuntime":
        versions = set(doc["spec"]["protocolVersions"])
        if not versions <= {"v1", "v2", "grpc-v1", "grpc-v2"}:
            problems.append(f"protocolVersions {sorted(versions)} outside v1, v2, grpc-v1, grpc-v2")
        for fmt in doc["spec"]["supportedModelFormats"]:
            if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("autoSelect", False), bool) \
                    or not isinstance(fmt.get("priority", 1), int):
                problems.append(f"supportedModelFormats entry {fmt}: name str, autoSelect bool, priority int")
        names = [c.get("name") for c in doc["spec"]["containers"]]
        if "kserve-container" not in names:
            problems.append("KServe runs the container named kserve-container; got " + str(names))
        problems += container_problems(doc["spec"]["containers"], "runtime")
        for container in doc["spec"]["containers"]:
            problems += pod_security_problems({}, container)
    if key[1] == "ScaledObject":
        for trigger in doc["spec"]["triggers"]:
            meta = trigger.get("metadata", {})
            if trigger.get("type") != "prometheus":
                continue
            for field in ("serverAddress", "query", "threshold"):
                if not isinstance(meta.get(field), str):
                    problems.append(f"prometheus trigger metadata.{field} must be a string")
            problems += metric_problems(meta.get("query", ""))
    if key[1] == "ServiceMonitor":
        for endpoint in doc["spec"]["endpoints"]:
            if not isinstance(endpoint.get("port"), str):
                problems.append("endpoints[].port must name a Service port")
            if endpoint.get("path") not in spec_paths():
                problems.append(f"endpoint path {endpoint.get('path')} is not in openapi.yaml")
    check(label + " has the fields its spec defines", not problems, "; ".join(problems))


def metric_problems(text):
    names = set(re.findall(r"osprey_[a-z_]+", text))
    missing = names - exported_metrics()
    return [f"metrics {sorted(missing)} are not exported by Osprey"] if missing else []


def container_problems(containers, where):
    problems = []
    flags = serve_flags()
    paths = spec_paths()
    for container in containers:
        for env in container.get("env", []):
            name = env["name"]
            if name.startswith("OSPREY_") and name[7:].lower().replace("_", "-") not in flags:
                problems.append(f"{where}: {name} is not an `osprey serve` flag")
        for arg in container.get("args", []):
            if arg.startswith("--") and arg[2:].split("=")[0] not in flags:
                problems.append(f"{where}: {arg} is not an `osprey serve` flag")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            path = get(container, probe + ".httpGet.path")
            if path is not None and path not in paths:
                problems.append(f"{where}: {probe} path {path} is not in openapi.yaml")
    return problems


def pod_security_problems(pod, container):
    """Pod Security Standards, 'restricted' profile, for one container under one pod spec."""
    problems = []
    sc = container.get("securityContext", {})
    psc = pod.get("securityContext", {})
    name = container.get("name")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{name}: allowPrivilegeEscalation must be false")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        problems.append(f"{name}: capabilities must drop ALL")
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        problems.append(f"{name}: runAsNonRoot must be true")
    seccomp = get(sc, "seccompProfile.type") or get(psc, "seccompProfile.type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        problems.append(f"{name}: seccompProfile must be RuntimeDefault")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{name}: readOnlyRootFilesystem must be true")
    if sc.get("privileged"):
        problems.append(f"{name}: privileged")
    return problems


def check_deployment(doc, docs, where):
    pod = doc["spec"]["template"]["spec"]
    containers = pod["containers"] + pod.get("initContainers", [])
    problems = container_problems(pod["containers"], "containers")
    for container in containers:
        problems += pod_security_problems(pod, container)
    labels = doc["spec"]["template"]["metadata"]["labels"]
    selector = doc["spec"]["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        problems.append("selector does not match the pod labels")
    main = next(c for c in pod["containers"] if c["name"] == "osprey")
    env = {e["name"]: e for e in main.get("env", [])}
    if get(env.get("OSPREY_THREADS", {}), "valueFrom.resourceFieldRef.resource") != "requests.cpu":
        problems.append("OSPREY_THREADS must come from the CPU request (downward API)")
    config = {}
    for ref in main.get("envFrom", []):
        name = get(ref, "configMapRef.name")
        for other in docs:
            if other.get("kind") == "ConfigMap" and other["metadata"]["name"] == name:
                config.update(other.get("data", {}))
    for key in config:
        if key.startswith("OSPREY_") and key[7:].lower().replace("_", "-") not in serve_flags():
            problems.append(f"ConfigMap sets {key}, which is not an `osprey serve` flag")
    drain = duration(config.get("OSPREY_DRAIN_DELAY", "0"))
    shutdown = duration(config.get("OSPREY_SHUTDOWN_TIMEOUT", "30"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace <= drain + shutdown:
        problems.append(f"terminationGracePeriodSeconds {grace} must exceed drain {drain} + shutdown {shutdown}")
    if drain <= 0 and not get(main, "lifecycle.preStop"):
        problems.append("neither a drain delay nor a preStop hook: connections are refused while endpoints update")
    for volume in pod.get("volumes", []):
        if "emptyDir" in volume and any(m["name"] == volume["name"] and m["mountPath"] in ("/models", "/mnt/models")
                                        for m in main.get("volumeMounts", [])):
            problems.append("an emptyDir over the model repository hides the models")
    if str(main.get("image", "")).endswith(":latest"):
        problems.append("image tag latest")
    services = [d for d in docs if d.get("kind") == "Service"]
    if not any(all(labels.get(k) == v for k, v in s["spec"]["selector"].items()) for s in services):
        problems.append("no Service selects these pods")
    check(f"{where}: Deployment/{doc['metadata']['name']} probes, flags, drain, Pod Security restricted",
          not problems, "; ".join(problems))


def duration(text):
    text = str(text)
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60)):
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * scale
    return float(text or 0)


def check_kustomizations(kubectl):
    for path in sorted(glob.glob(os.path.join(DEPLOY, "kubernetes", "**", "kustomization.yaml"), recursive=True)):
        folder = os.path.dirname(path)
        where = os.path.relpath(folder, ROOT)
        run = subprocess.run([kubectl, "kustomize", folder], capture_output=True, text=True)
        check(f"{where}: renders with `kubectl kustomize`", run.returncode == 0, run.stderr.strip()[-400:])
        if run.returncode != 0:
            continue
        docs = [d for d in yaml.safe_load_all(run.stdout) if d]
        for doc in docs:
            check_document(doc, docs, where)


def check_document(doc, docs, where):
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    core = group in ("", "apps", "policy", "autoscaling", "batch", "networking.k8s.io", "rbac.authorization.k8s.io")
    if core:
        try:
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
            check(f"{where}: {doc['kind']}/{doc['metadata']['name']} validates (Kubernetes {kubernetes_validate.latest_version()}, strict)", True)
        except Exception as error:  # kubernetes_validate raises several error types
            check(f"{where}: {doc['kind']}/{doc['metadata']['name']} validates", False, str(error)[:400])
        if doc["kind"] == "Deployment":
            check_deployment(doc, docs, where)
        if doc["kind"] == "HorizontalPodAutoscaler":
            problems = []
            for metric in doc["spec"].get("metrics", []):
                name = get(metric, "pods.metric.name") or get(metric, "object.metric.name") or ""
                problems += metric_problems(name)
            target = doc["spec"]["scaleTargetRef"]["name"]
            if not any(d.get("kind") == "Deployment" and d["metadata"]["name"] == target for d in docs):
                problems.append(f"scaleTargetRef {target} is not in the rendering")
            check(f"{where}: HorizontalPodAutoscaler scales on Osprey's own metrics", not problems, "; ".join(problems))
    else:
        check_custom(doc, where)


def check_plain_manifests():
    for path in sorted(glob.glob(os.path.join(DEPLOY, "kserve", "*.yaml"))):
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
        for doc in docs:
            check_document(doc, docs, os.path.relpath(path, ROOT))
    rules = yaml.safe_load(open(os.path.join(DEPLOY, "kubernetes", "overlays", "hpa", "prometheus-adapter-rules.yaml")))
    problems = []
    for rule in rules["rules"]:
        problems += metric_problems(rule["seriesQuery"] + " " + rule["name"]["as"])
    check("prometheus-adapter rules name exported metrics", not problems, "; ".join(problems))


def check_dockerfile():
    hadolint = shutil.which("hadolint")
    run = subprocess.run([hadolint, os.path.join(DEPLOY, "Dockerfile")], capture_output=True, text=True)
    check("Deploy/Dockerfile is hadolint-clean", run.returncode == 0, (run.stdout + run.stderr).strip())
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    problems = []
    if not re.search(r"^USER \d+(:\d+)?$", text, re.M):
        problems.append("USER must be numeric (runAsNonRoot verifies it)")
    if "HEALTHCHECK" not in text:
        problems.append("no HEALTHCHECK")
    if not os.path.exists(os.path.join(ROOT, ".dockerignore")):
        problems.append("no .dockerignore")
    check("Deploy/Dockerfile: numeric user, HEALTHCHECK, .dockerignore", not problems, "; ".join(problems))


def check_systemd(osprey):
    unit = os.path.join(DEPLOY, "osprey.service")
    with tempfile.TemporaryDirectory() as tmp:
        # verify wants the ExecStart binary to exist: point a copy at the one just built.
        copy = os.path.join(tmp, "osprey.service")
        open(copy, "w").write(open(unit).read().replace("/usr/local/bin/osprey", osprey))
        run = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True)
        check("Deploy/osprey.service: systemd-analyze verify", run.returncode == 0, (run.stdout + run.stderr).strip())
    run = subprocess.run(["systemd-analyze", "security", "--offline=yes", unit], capture_output=True, text=True)
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", run.stdout + run.stderr)
    level = float(match.group(1)) if match else 99
    check(f"Deploy/osprey.service: exposure {level} <= 2.5", level <= 2.5, (run.stdout + run.stderr).strip()[-300:])
    text = open(unit).read()
    problems = [f"missing {key}" for key in ("LimitNOFILE=", "Wants=network-online.target") if key not in text]
    flags = serve_flags()
    for flag in re.findall(r"\s--([a-z-]+)", re.search(r"^ExecStart=(.*)$", text, re.M).group(1)):
        if flag not in flags:
            problems.append(f"ExecStart flag --{flag} is not an `osprey serve` flag")
    check("Deploy/osprey.service: LimitNOFILE, Wants=network-online.target, real flags", not problems, "; ".join(problems))


def check_systemd_start(osprey, models):
    """Starts the hardened unit for real (a copy on a free port, the built binary, a scratch state directory) and
    probes it: only where systemd is PID 1, since that is what the sandboxing options need."""
    name = "Deploy/osprey.service: starts under systemd with its sandboxing and serves"
    try:
        init = open("/proc/1/comm").read().strip()
    except OSError:
        init = "unknown"
    if init != "systemd" or not os.path.isdir("/run/systemd/system"):
        skip(name, f"PID 1 is '{init}', not systemd: the unit can only be verified and scored here")
        return
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    unit = "osprey-test-%d.service" % os.getpid()
    text = open(os.path.join(DEPLOY, "osprey.service")).read().replace("/usr/local/bin/osprey", osprey)
    text = text.replace("--port 8080", f"--port {port}").replace("--host 0.0.0.0", "--host 127.0.0.1")
    text = text.replace("--model-repository /var/lib/osprey/models", "--model-repository " + os.path.abspath(models))
    text = text.replace("ProtectHome=yes", "ProtectHome=read-only")  # the checkout may live under /home or /root
    path = os.path.join("/run/systemd/system", unit)
    open(path, "w").write(text)
    try:
        subprocess.run(["systemctl", "daemon-reload"], check=True)
        subprocess.run(["systemctl", "start", unit], check=True)
        ok = False
        for _ in range(100):
            if subprocess.run([osprey, "probe", "--port", str(port), "--path", "/v2/health/ready"], capture_output=True).returncode == 0:
                ok = True
                break
            time.sleep(0.1)
        status = subprocess.run(["systemctl", "status", "--no-pager", unit], capture_output=True, text=True).stdout
        check(name, ok, status[-600:])
    finally:
        subprocess.run(["systemctl", "stop", unit])
        os.remove(path)
        subprocess.run(["systemctl", "daemon-reload"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--osprey", required=True, help="a built osprey binary (for systemd-analyze verify)")
    args = parser.parse_args()
    check_kustomizations(args.kubectl)
    check_plain_manifests()
    check_dockerfile()
    check_systemd(args.osprey)
    check_systemd_start(args.osprey, os.path.join(ROOT, "models"))
    failed = results.count(False)
    print(f"deploy checks: {results.count(True)} passed, {failed} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
