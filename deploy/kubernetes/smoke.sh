#!/usr/bin/env bash
# Smoke run of deploy/kubernetes on one machine, without a cluster (not part of `pnpm test`): renders the
# base with components/postgres (`kubectl kustomize`), builds todos and the decider from this repository's
# Dockerfiles, plays the rendered pods with `podman kube play`, then makes a todo and a decision from a
# client on the pods' network, through the Services' names.
#
#   deploy/kubernetes/smoke.sh            # from anywhere; needs kubectl, podman (Debian's 4.3) and node
#
# What podman is not, and how the script stands in for it (the manifests themselves are not changed):
# - No Services: each pod gets a fixed address on a network of the script's own, and every pod (and the
#   client) maps the Service names (todos, decider, postgres, model) to those addresses (hostAliases).
# - No Secrets from the cluster: the rendered objects' secretKeyRef values are filled in, in a temporary
#   directory, with a password made for this run; optional Secrets left unset are dropped.
# - Deployments and the StatefulSet are played as one Pod each; probes, PodDisruptionBudgets,
#   NetworkPolicies and autoscalers are Kubernetes' and not played. Ports are not declared (podman 4
#   publishes every declared port on the host); each emptyDir is a directory of the run's own, mode 0777
#   as a cluster makes one (podman 4.3 shares one named volume per name, owned as the image's directory).
# - The base's decider asks the Service `model`: a stand-in model server (an OpenAI-compatible server on
#   Node, after the one tools/deploy-checks' image tests use, answering every call with the same
#   distribution) plays it, so a decision round-trips without downloading a model; its answer means nothing.
# Environment:
#   NODE_BASE       an image to build FROM instead of the Dockerfiles' pinned node image (a local stand-in
#                   where no registry is reachable: docs/deploy.md, "Building and running without a registry")
#   POSTGRES_IMAGE  likewise for components/postgres's postgres image
#   KEEP=1          leave the pods running at the end
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
WORK="$(mktemp -d)"
NET=localdecider-smoke
SUBNET=10.89.70
declare -A IP=([postgres]=$SUBNET.10 [todos]=$SUBNET.11 [model]=$SUBNET.12 [decider]=$SUBNET.13 [client]=$SUBNET.20)
TODOS_VERSION="$(node -p 'require("./services/todos/package.json").version')"
DECIDER_VERSION="$(node -p 'require("./services/decider/package.json").version')"

say() { printf '\n== %s\n' "$*"; }
cleanup() {
  if [ "${KEEP:-}" != 1 ]; then
    for pod in decider model todos postgres; do podman pod rm -f "$pod" >/dev/null 2>&1 || true; done
    podman volume rm -f data-postgres >/dev/null 2>&1 || true
    podman network rm -f "$NET" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

say "building the images from the Dockerfiles"
for svc in todos decider; do
  version=$([ "$svc" = todos ] && echo "$TODOS_VERSION" || echo "$DECIDER_VERSION")
  if [ -n "${NODE_BASE:-}" ]; then
    sed "s|^FROM node:[^ ]*|FROM $NODE_BASE|" "services/$svc/Dockerfile" > "$WORK/$svc.Dockerfile"
  else
    cp "services/$svc/Dockerfile" "$WORK/$svc.Dockerfile"
  fi
  podman build --quiet -t "localdecider/$svc:$version" -f "$WORK/$svc.Dockerfile" . > /dev/null
  echo "localdecider/$svc:$version built"
done

say "rendering deploy/kubernetes/base with components/postgres"
mkdir "$WORK/kustomization"
rel="$(node -p "require('path').relative('$WORK/kustomization', '$ROOT/deploy/kubernetes')")"
cat > "$WORK/kustomization/kustomization.yaml" <<EOF
namespace: localdecider
resources: [$rel/base]
components: [$rel/components/postgres]
EOF
kubectl kustomize "$WORK/kustomization" > "$WORK/rendered.yaml"
grep -c '^kind:' "$WORK/rendered.yaml" | xargs echo "objects rendered:"

say "turning each workload into a pod for podman kube play"
PGPASS="$(node -p 'require("crypto").randomBytes(18).toString("hex")')"
export WORK PGPASS POSTGRES_IMAGE="${POSTGRES_IMAGE:-}"
export HOSTS="postgres=${IP[postgres]},todos=${IP[todos]},model=${IP[model]},decider=${IP[decider]}"
node - <<'JS'
const fs = require("fs");
const path = require("path");
const { parseAllDocuments } = require(path.resolve("tools/deploy-checks/node_modules/yaml"));
const { WORK, PGPASS, POSTGRES_IMAGE, HOSTS } = process.env;
const objects = parseAllDocuments(fs.readFileSync(`${WORK}/rendered.yaml`, "utf8")).map((d) => d.toJS());
const secrets = {
  "postgres/password": PGPASS,
  "todos-database/DATABASE_URL": `postgresql://todos:${PGPASS}@postgres:5432/todos`,
};
const hostAliases = HOSTS.split(",").map((h) => ({ ip: h.split("=")[1], hostnames: [h.split("=")[0]] }));
const pods = {};
for (const o of objects.filter((x) => x.kind === "Deployment" || x.kind === "StatefulSet")) {
  const spec = o.spec.template.spec;
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    c.env = (c.env ?? []).flatMap((e) => {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref === undefined) return [e];
      const value = secrets[`${ref.name}/${ref.key}`];
      if (value === undefined && ref.optional) return [];
      if (value === undefined) throw new Error(`no value for Secret ${ref.name} key ${ref.key}`);
      return [{ name: e.name, value }];
    });
    if (POSTGRES_IMAGE && c.image.startsWith("postgres:")) c.image = POSTGRES_IMAGE;
    // podman 4 publishes every containerPort on the host: reached by the pod's address instead, so the
    // ports go, and probes name the port by number.
    const numbers = Object.fromEntries((c.ports ?? []).map((p) => [p.name, p.containerPort]));
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const action = c[probe]?.httpGet ?? c[probe]?.tcpSocket;
      if (action && typeof action.port === "string") action.port = numbers[action.port];
    }
    delete c.ports;
  }
  // An emptyDir in memory is a root-owned tmpfs under podman, where a cluster makes it writable to the pod
  // (mode 0777, fsGroup): on disk, podman copies the image directory's owner and mode into it instead.
  // podman 4.3 plays an emptyDir as a named volume of the volume's own name, shared by every pod that names
  // one alike, and gives it the owner of the image's directory: each is a directory of this run's own
  // instead, mode 0777 as a cluster makes an emptyDir.
  for (const v of spec.volumes ?? []) {
    if (!v.emptyDir) continue;
    const dir = `${WORK}/empty-dirs/${o.metadata.name}-${v.name}`;
    fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dir, 0o1777);
    delete v.emptyDir;
    v.hostPath = { path: dir, type: "Directory" };
  }
  for (const claim of o.spec.volumeClaimTemplates ?? []) {
    spec.volumes = [...(spec.volumes ?? []), { name: claim.metadata.name, persistentVolumeClaim: { claimName: `${claim.metadata.name}-${o.metadata.name}` } }];
  }
  spec.hostAliases = hostAliases;
  // podman 4.3 fails to remove a finished "once" init container (it still counts it as running): kept
  // instead, and the pod restarts containers only on failure (or the kept one reruns each time it exits).
  const annotations = { "io.podman.annotations.init.container.type": "always" };
  spec.restartPolicy = "OnFailure";
  pods[o.metadata.name] = { apiVersion: "v1", kind: "Pod", metadata: { name: o.metadata.name, labels: o.spec.template.metadata.labels, annotations }, spec };
}
// The stand-in model server, in the todos image (it has Node): what the base's decider finds at `model`.
const server = `
const http = require("http");
http.createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  if (req.url === "/v1/models") return res.end(JSON.stringify({ object: "list", data: [{ id: "qwen2.5-1.5b-instruct", object: "model" }] }));
  if (req.url !== "/v1/chat/completions") return res.writeHead(404).end("{}");
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    const messages = JSON.parse(body).messages;
    const prefilled = messages[messages.length - 1]?.role === "assistant";
    // The start-up check's continuation first, then a yes/no question's outcomes (JSON booleans).
    const top = [{ token: '"', logprob: Math.log(0.5) }, { token: "true", logprob: Math.log(0.3) },
      { token: "false", logprob: Math.log(0.15) }, { token: " ", logprob: Math.log(0.05) }];
    res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 0, model: "qwen2.5-1.5b-instruct",
      choices: [{ index: 0, message: { role: "assistant", content: '"' }, finish_reason: "length", logprobs: { content: [{ ...top[0], top_logprobs: top }] } }],
      usage: { prompt_tokens: prefilled ? 11 : 10, completion_tokens: 1, total_tokens: 12 } }));
  });
}).listen(8081, "0.0.0.0", () => console.log("stand-in model server on :8081"));`;
const todosImage = pods.todos.spec.containers[0].image;
pods.model = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "model", labels: { "app.kubernetes.io/name": "model" } },
  spec: {
    hostAliases,
    securityContext: { runAsNonRoot: true, runAsUser: 1000 },
    // The script travels base64-encoded: podman 4.3's YAML reader stumbles on it written out.
    containers: [{ name: "model", image: todosImage, command: ["node", "-e", 'eval(Buffer.from(process.env.SERVER, "base64").toString())'],
      env: [{ name: "SERVER", value: Buffer.from(server).toString("base64") }],
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } } }],
  },
};
// As JSON, which is YAML too.
for (const [name, pod] of Object.entries(pods)) fs.writeFileSync(`${WORK}/${name}.yaml`, JSON.stringify(pod, null, 1));
console.log(Object.keys(pods).join(" "));
JS

say "playing the pods (podman $(podman version --format '{{.Client.Version}}'))"
podman network create --subnet "$SUBNET.0/24" "$NET" > /dev/null
podman volume create data-postgres > /dev/null
# The StatefulSet's volume is made its group's (fsGroup), as a cluster's volume plugin would.
chown 999:999 "$(podman volume inspect data-postgres --format '{{.Mountpoint}}')"
for pod in postgres todos model decider; do
  podman kube play --network "$NET" --ip "${IP[$pod]}" "$WORK/$pod.yaml" > /dev/null
  echo "$pod played at ${IP[$pod]}"
  if [ "$pod" = postgres ]; then
    # todos' init container needs the database: podman plays a pod's init containers to the end first.
    for i in $(seq 60); do
      podman exec postgres-postgres pg_isready -h 127.0.0.1 -U todos -d todos > /dev/null 2>&1 && break
      [ "$i" = 60 ] && { podman logs postgres-postgres 2>&1 | tail -n 5; echo "postgres never ready" >&2; exit 1; }
      sleep 1
    done
  fi
done

say "a client on the pods' network, through the Services' names"
podman run --rm --network "$NET" --ip "${IP[client]}" \
  $(for h in postgres todos model decider; do printf -- '--add-host %s:%s ' "$h" "${IP[$h]}"; done) \
  --entrypoint node localdecider/todos:"$TODOS_VERSION" -e '
const wait = async (url) => {
  for (let i = 0; i < 120; i++) {
    try { const r = await fetch(url); if (r.ok) return r.json(); } catch {}
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`${url} never ready`);
};
(async () => {
  console.log("todos /ready:", JSON.stringify(await wait("http://todos:3000/ready")));
  const user = "smoke-" + Date.now();
  const created = await fetch(`http://todos:3000/users/${user}/todos`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ title: "play the base" }) });
  console.log("POST /users/:user/todos:", created.status, JSON.stringify(await created.json()));
  const list = await fetch(`http://todos:3000/users/${user}/todos`);
  console.log("GET  /users/:user/todos:", list.status, JSON.stringify(await list.json()));
  console.log("decider /ready:", JSON.stringify(await wait("http://decider:8080/ready")));
  const decision = await fetch("http://decider:8080/v1/systemone", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "localdecider", state: "a smoke run", questions: { done: { type: "noul", instructions: "Is it done?" } } }) });
  console.log("POST /v1/systemone:", decision.status, JSON.stringify(await decision.json()));
  if (!created.ok || !list.ok || !decision.ok) process.exit(1);
})().catch((e) => { console.error(e); process.exit(1); });'

say "pods, and todos' migrate init container"
podman pod ps --format '{{.Name}} {{.Status}} {{.NumberOfContainers}} containers'
podman logs todos-migrate 2>&1
say "smoke run passed"
