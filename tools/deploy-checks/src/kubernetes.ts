import { readFileSync } from "node:fs";
import { drainSeconds } from "./drain";
import { type K8sObject, splitImage } from "./kustomize";
import { imageProblem } from "./pins";
import { REPO_ROOT, SECRET_NAME, serviceSchemas } from "./repo";

/**
 * The policies every object of deploy/kubernetes must keep (issue 34, item 2), one function each, every one
 * answering the problems it finds (none: []). test/kubernetes.test.ts runs each on every overlay, and breaks
 * each rule in a copy of an object to show that its check then fails.
 */

// biome-ignore lint/suspicious/noExplicitAny: pod specs and containers as read from YAML
type Any = any;

export interface Workload {
  object: K8sObject;
  /** The `app.kubernetes.io/name` of its pods. */
  name: string;
  labels: Record<string, string>;
  pod: Any;
}

/** The Deployments and StatefulSets, with their pod templates. */
export function workloads(objects: K8sObject[]): Workload[] {
  return objects
    .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")
    .map((o) => {
      const labels = (o.spec?.template?.metadata?.labels ?? {}) as Record<string, string>;
      return {
        object: o,
        name: labels["app.kubernetes.io/name"] ?? o.metadata.name,
        labels,
        pod: o.spec?.template?.spec,
      };
    });
}

function containers(w: Workload, withInit = false): Any[] {
  return [...(withInit ? (w.pod?.initContainers ?? []) : []), ...(w.pod?.containers ?? [])];
}

function envOf(container: Any): Map<string, Any> {
  return new Map((container.env ?? []).map((e: Any) => [e.name, e]));
}

function matches(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  if (selector === undefined || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/**
 * Images built from this repository's Dockerfiles, which a user builds, pushes and pins (docs/kubernetes.md):
 * as committed, `localdecider/<image>:<the service's version>`; pinned in a user's kustomization, by digest
 * in their registry (Kustomize's `images:` with a digest drops the tag).
 */
export function ownImageProblem(image: string): string | undefined {
  if (
    /^([a-z0-9][a-z0-9._:-]*\/)*localdecider\/(todos|decider|decider-embedded)(:[\w.-]+)?@sha256:[0-9a-f]{64}$/.test(
      image,
    )
  ) {
    return undefined;
  }
  const m = /^localdecider\/(todos|decider|decider-embedded):(.+)$/.exec(image);
  if (m === null) return `${image} is not one of this repository's images`;
  const service = m[1] === "todos" ? "todos" : "decider";
  const version = (
    JSON.parse(readFileSync(`${REPO_ROOT}/services/${service}/package.json`, "utf8")) as { version: string }
  ).version;
  return m[2] === version ? undefined : `${image}: the tag is not ${service}'s version ${version}`;
}

/**
 * Images only deploy/kubernetes uses and that are left at a tag, for the reason UNRESOLVED_IMAGES (pins.ts)
 * gives for llama.cpp's: no source reachable where these files were written names their digest.
 * docs/kubernetes.md lists them with how to pin them.
 */
export const KUBERNETES_UNRESOLVED_IMAGES: Record<string, string> = {
  "ghcr.io/ggml-org/llama.cpp:server-cuda-b11206":
    "overlays/gpu: the CUDA build of compose's llama.cpp tag; no public source names its digest",
};

/** Every image by tag and digest, but llama.cpp's listed exceptions and the repository's own images. */
export function imageProblems(objects: K8sObject[]): string[] {
  return workloads(objects).flatMap((w) =>
    containers(w, true).flatMap((c) => {
      const image = String(c.image);
      const problem =
        ownImage(c) !== undefined
          ? ownImageProblem(image)
          : image in KUBERNETES_UNRESOLVED_IMAGES
            ? undefined
            : imageProblem(image);
      return problem === undefined ? [] : [`${w.name}/${c.name}: ${problem}`];
    }),
  );
}

/** A model loader: a llama.cpp server, or a decider running its embedded engine (no LOCALDECIDER_UPSTREAM). */
function loadsModel(c: Any): boolean {
  if (String(c.image).startsWith("ghcr.io/ggml-org/llama.cpp:")) return true;
  return ownImage(c) === "decider" && !envOf(c).has("LOCALDECIDER_UPSTREAM");
}

/** Which of this repository's services a container runs (its image, wherever it was pushed), if any. */
export function ownImage(c: Any): "todos" | "decider" | undefined {
  const m = /(?:^|\/)localdecider\/(todos|decider|decider-embedded)$/.exec(splitImage(String(c.image)).name);
  if (m === null) return undefined;
  return m[1] === "todos" ? "todos" : "decider";
}

const probeWindow = (p: Any) => (p.periodSeconds ?? 10) * (p.failureThreshold ?? 3);

/** The longest a model's first download and load is given before the startup probe restarts the pod. */
export const MODEL_START_SECONDS = 20 * 60;

/**
 * Startup, liveness and readiness probes on every container; this repository's services answer liveness on
 * /health and readiness on /ready; a container that loads a model has a startup window of at least
 * MODEL_START_SECONDS, probing what says the model is loaded (the decider's /ready, llama-server's /health).
 */
export function probeProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    for (const c of containers(w)) {
      const where = `${w.name}/${c.name}`;
      for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
        if (c[probe] === undefined) problems.push(`${where} has no ${probe}`);
      }
      if (ownImage(c) !== undefined) {
        if (c.livenessProbe?.httpGet?.path !== "/health") problems.push(`${where}: liveness is not GET /health`);
        if (c.readinessProbe?.httpGet?.path !== "/ready") problems.push(`${where}: readiness is not GET /ready`);
      }
      if (loadsModel(c)) {
        const readyPath = ownImage(c) !== undefined ? "/ready" : "/health";
        if (c.startupProbe?.httpGet?.path !== readyPath) {
          problems.push(`${where}: its startup probe does not wait for the model (GET ${readyPath})`);
        }
        if (c.startupProbe !== undefined && probeWindow(c.startupProbe) < MODEL_START_SECONDS) {
          problems.push(
            `${where}: its startup probe allows ${probeWindow(c.startupProbe)} s, under ${MODEL_START_SECONDS} s`,
          );
        }
      }
    }
  }
  return problems;
}

/** CPU and memory requests and limits on every container, init containers included. */
export function resourceProblems(objects: K8sObject[]): string[] {
  return workloads(objects).flatMap((w) =>
    containers(w, true).flatMap((c) =>
      ["requests", "limits"].flatMap((kind) =>
        ["cpu", "memory"]
          .filter((r) => c.resources?.[kind]?.[r] === undefined)
          .map((r) => `${w.name}/${c.name} has no ${kind}.${r}`),
      ),
    ),
  );
}

/**
 * Pod Security "restricted" and a read-only root: non-root, seccomp RuntimeDefault, no privilege escalation,
 * every capability dropped and none added, a read-only root filesystem; no service account token mounted.
 * Every mount names a volume of the pod (what the container may write is a volume: emptyDir or a claim).
 */
export function securityProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    const pod = w.pod?.securityContext ?? {};
    if (w.pod?.automountServiceAccountToken !== false) problems.push(`${w.name}: the service account token is mounted`);
    const volumes = new Set((w.pod?.volumes ?? []).map((v: Any) => v.name));
    for (const claim of w.object.spec?.volumeClaimTemplates ?? []) volumes.add(claim.metadata?.name);
    for (const c of containers(w, true)) {
      const where = `${w.name}/${c.name}`;
      const sc = c.securityContext ?? {};
      if ((sc.runAsNonRoot ?? pod.runAsNonRoot) !== true) problems.push(`${where} may run as root (runAsNonRoot)`);
      if ((sc.runAsUser ?? pod.runAsUser) === 0) problems.push(`${where} runs as user 0`);
      if ((sc.seccompProfile ?? pod.seccompProfile)?.type !== "RuntimeDefault")
        problems.push(`${where}: seccomp is not RuntimeDefault`);
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${where} may escalate privileges`);
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${where}: the root filesystem is writable`);
      if (!(sc.capabilities?.drop ?? []).includes("ALL")) problems.push(`${where} does not drop ALL capabilities`);
      if ((sc.capabilities?.add ?? []).length > 0) problems.push(`${where} adds capabilities`);
      if (sc.privileged === true) problems.push(`${where} is privileged`);
      for (const m of c.volumeMounts ?? []) {
        if (!volumes.has(m.name)) problems.push(`${where} mounts ${m.name}, which is no volume of the pod`);
      }
    }
  }
  return problems;
}

/** The preStop sleep of a container, in seconds (an exec `sleep N` or the sleep action), or undefined. */
export function preStopSeconds(c: Any): number | undefined {
  const pre = c.lifecycle?.preStop;
  if (pre?.sleep?.seconds !== undefined) return Number(pre.sleep.seconds);
  const command = pre?.exec?.command as string[] | undefined;
  if (command?.[0] === "sleep" && command.length === 2) return Number(command[1]);
  return undefined;
}

/** How long a container drains after SIGTERM: the services' own drain (drain.ts), else nothing known. */
function drainOf(c: Any): number {
  const service = ownImage(c);
  if (service === "todos") return drainSeconds("todos");
  if (service === "decider") {
    const timeout = envOf(c).get("LOCALDECIDER_TIMEOUT")?.value;
    return timeout === undefined ? drainSeconds("decider") : Number(timeout);
  }
  return 0;
}

/**
 * Shutdown: every container sleeps in preStop (endpoints drop the pod before it stops accepting), and the
 * grace period outlasts that sleep plus the service's drain, with at least 5 s to spare.
 */
export function shutdownProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    const grace = w.pod?.terminationGracePeriodSeconds ?? 30;
    for (const c of containers(w)) {
      const sleep = preStopSeconds(c);
      if (sleep === undefined || sleep <= 0) {
        problems.push(`${w.name}/${c.name} has no preStop sleep`);
        continue;
      }
      const needed = sleep + drainOf(c) + 5;
      if (grace < needed) {
        problems.push(
          `${w.name}: terminationGracePeriodSeconds ${grace} < preStop ${sleep} + drain ${drainOf(c)} + 5 s`,
        );
      }
    }
  }
  return problems;
}

/** Every workload spreads its pods over nodes (a constraint whose selector picks its own pods). */
export function topologyProblems(objects: K8sObject[]): string[] {
  return workloads(objects)
    .filter(
      (w) =>
        !(w.pod?.topologySpreadConstraints ?? []).some(
          (t: Any) => t.topologyKey === "kubernetes.io/hostname" && matches(t.labelSelector?.matchLabels, w.labels),
        ),
    )
    .map((w) => `${w.name} has no topology spread over nodes for its own pods`);
}

/** Credentials are referenced from Secrets, never written: no Secret object, no literal secret value. */
export function secretProblems(objects: K8sObject[]): string[] {
  const problems = objects
    .filter((o) => o.kind === "Secret")
    .map((o) => `Secret/${o.metadata.name} is written in the manifests`);
  for (const w of workloads(objects)) {
    for (const c of containers(w, true)) {
      for (const e of c.env ?? []) {
        if (e.value === undefined) continue;
        if (SECRET_NAME.test(e.name)) problems.push(`${w.name}/${c.name}: ${e.name} has a literal value`);
        // A password inside a URL, unless it is a $(VAR) filled from a Secret.
        const password = /^[a-z][a-z0-9+.-]*:\/\/[^/@:]*:([^@/]*)@/i.exec(String(e.value))?.[1];
        if (password !== undefined && password !== "" && !/^\$\([A-Z_][A-Z0-9_]*\)$/.test(password)) {
          problems.push(`${w.name}/${c.name}: ${e.name} holds a password`);
        }
        const variable = /^\$\(([A-Z_][A-Z0-9_]*)\)$/.exec(password ?? "")?.[1];
        if (variable !== undefined && envOf(c).get(variable)?.valueFrom?.secretKeyRef === undefined) {
          problems.push(`${w.name}/${c.name}: ${e.name} takes $(${variable}), which is not from a Secret`);
        }
      }
    }
  }
  return problems;
}

/** A PodDisruptionBudget for every workload, never one that forbids every eviction. */
export function disruptionProblems(objects: K8sObject[]): string[] {
  const budgets = objects.filter((o) => o.kind === "PodDisruptionBudget");
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    const mine = budgets.filter((b) => matches(b.spec?.selector?.matchLabels, w.labels));
    if (mine.length !== 1) {
      problems.push(`${w.name} has ${mine.length} PodDisruptionBudgets (one expected)`);
      continue;
    }
    const spec = (mine[0] as K8sObject).spec;
    if (spec.maxUnavailable === undefined || spec.maxUnavailable === 0 || spec.maxUnavailable === "0%") {
      problems.push(`${w.name}: its PodDisruptionBudget lets no pod be evicted (set maxUnavailable of 1 or more)`);
    }
  }
  return problems;
}

/** Which workload may call which: the database only from todos, Redis and model servers only from the decider. */
export const ONLY_FROM: Record<string, string> = { postgres: "todos", redis: "decider", model: "decider" };

/**
 * A NetworkPolicy for every workload's ingress; the backing services' admit only the pods that need them,
 * by pod label, on the service's port (no namespace selector, no address block).
 */
export function networkProblems(objects: K8sObject[]): string[] {
  const policies = objects.filter((o) => o.kind === "NetworkPolicy");
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    const mine = policies.filter(
      (p) => matches(p.spec?.podSelector?.matchLabels, w.labels) && (p.spec?.policyTypes ?? []).includes("Ingress"),
    );
    if (mine.length === 0) {
      problems.push(`${w.name} has no ingress NetworkPolicy`);
      continue;
    }
    const only = ONLY_FROM[w.name];
    if (only === undefined) continue;
    for (const p of mine) {
      for (const rule of p.spec.ingress ?? []) {
        const from = (rule.from ?? []) as Any[];
        const allowed =
          from.length > 0 &&
          from.every(
            (f) =>
              f.ipBlock === undefined &&
              f.namespaceSelector === undefined &&
              JSON.stringify(f.podSelector?.matchLabels) === JSON.stringify({ "app.kubernetes.io/name": only }),
          );
        if (!allowed) problems.push(`${w.name}: NetworkPolicy/${p.metadata.name} admits more than ${only}`);
        if ((rule.ports ?? []).length === 0)
          problems.push(`${w.name}: NetworkPolicy/${p.metadata.name} opens every port`);
      }
    }
  }
  return problems;
}

/** The most replicas a workload may have: its replicas, or the largest maximum of an autoscaler aimed at it. */
export function maxReplicas(objects: K8sObject[], w: Workload): number {
  const targets = (o: K8sObject) =>
    (o.kind === "HorizontalPodAutoscaler" || o.kind === "ScaledObject") &&
    o.spec?.scaleTargetRef?.name === w.object.metadata.name &&
    (o.spec?.scaleTargetRef?.kind ?? "Deployment") === w.object.kind;
  const scaled = objects.filter(targets).map((o) => Number(o.spec.maxReplicas ?? o.spec.maxReplicaCount ?? 100));
  return Math.max(w.object.spec?.replicas ?? 1, ...scaled);
}

/**
 * More than one decider replica needs the limits shared through Redis: LOCALDECIDER_REDIS_URL is set
 * whenever `replicas` or an autoscaler's maximum exceeds 1 (else each replica admits MAX_INFLIGHT per model
 * server on its own). The decider refuses it with the embedded engine, so that one stays at one replica.
 */
export function sharedLimitProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const w of workloads(objects).filter((x) => x.name === "decider")) {
    const most = maxReplicas(objects, w);
    for (const c of containers(w)) {
      if (most > 1 && !envOf(c).has("LOCALDECIDER_REDIS_URL")) {
        problems.push(`decider: up to ${most} replicas without LOCALDECIDER_REDIS_URL (limits not shared)`);
      }
    }
  }
  return problems;
}

/** Every namespaced object lands in the one namespace, which is created with Pod Security "restricted". */
export function namespaceProblems(objects: K8sObject[], namespace = "localdecider"): string[] {
  const problems = objects
    .filter((o) => o.kind !== "Namespace" && o.metadata.namespace !== namespace)
    .map((o) => `${o.kind}/${o.metadata.name} is not in namespace ${namespace}`);
  const ns = objects.find((o) => o.kind === "Namespace");
  if (ns?.metadata.name !== namespace) problems.push(`no Namespace ${namespace}`);
  else if (ns.metadata.labels?.["pod-security.kubernetes.io/enforce"] !== "restricted") {
    problems.push(`Namespace ${namespace} does not enforce Pod Security "restricted"`);
  }
  return problems;
}

/** Each Service selects a workload's pods and sends to a port one of its containers names. */
export function serviceProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const s of objects.filter((o) => o.kind === "Service")) {
    const backing = workloads(objects).filter((w) => matches(s.spec?.selector, w.labels));
    if (backing.length !== 1) {
      problems.push(`Service/${s.metadata.name} selects ${backing.length} workloads`);
      continue;
    }
    const ports = new Set(containers(backing[0] as Workload).flatMap((c) => (c.ports ?? []).map((p: Any) => p.name)));
    for (const p of s.spec.ports ?? []) {
      if (!ports.has(p.targetPort))
        problems.push(`Service/${s.metadata.name}: no container port named ${p.targetPort}`);
    }
  }
  return problems;
}

/**
 * todos' migrations run in an init container, before its pods serve: the same image as todos, the service's
 * own runner (migratePostgres, inside Prisma's advisory lock), on the same DATABASE_URL Secret.
 */
export function migrationProblems(objects: K8sObject[]): string[] {
  const todos = workloads(objects).find((w) => w.name === "todos");
  if (todos === undefined) return ["no todos workload"];
  const init = (todos.pod?.initContainers ?? []) as Any[];
  const main = (todos.pod?.containers ?? [])[0];
  const migrate = init.find((c) => (c.command ?? []).join(" ").includes("migratePostgres(process.env.DATABASE_URL)"));
  if (migrate === undefined) return ["todos: no init container runs the migrations"];
  const problems: string[] = [];
  if (migrate.image !== main?.image) problems.push("todos: the migrate init container runs another image than todos");
  const ref = (c: Any) => JSON.stringify(envOf(c).get("DATABASE_URL")?.valueFrom?.secretKeyRef);
  if (ref(migrate) === undefined || ref(migrate) !== ref(main)) {
    problems.push("todos: the migrate init container does not read todos' DATABASE_URL Secret");
  }
  return problems;
}

/**
 * The services' environments, as written, parse with their own config schemas (a value from a Secret or a
 * $(VAR) stands for a valid one): a variable the decider refuses (LOCALDECIDER_REDIS_URL with the embedded
 * engine, say) fails here rather than in a crash-looping pod.
 */
export function configProblems(objects: K8sObject[]): string[] {
  const schemas = serviceSchemas();
  const placeholder: Record<string, string> = {
    DATABASE_URL: "postgresql://todos:secret@postgres:5432/todos",
    LOCALDECIDER_API_KEY: "key",
    REDIS_PASSWORD: "secret",
  };
  const problems: string[] = [];
  for (const w of workloads(objects)) {
    for (const c of containers(w)) {
      const service = ownImage(c);
      if (service === undefined) continue;
      const env: Record<string, string> = {};
      for (const e of c.env ?? []) {
        const value = e.value ?? placeholder[e.name];
        if (value === undefined) problems.push(`${w.name}/${c.name}: no stand-in for ${e.name} from a Secret`);
        else env[e.name] = String(value).replace(/\$\(([A-Z_][A-Z0-9_]*)\)/g, (_m, name: string) => env[name] ?? "");
      }
      const result = schemas[service].safeParse(env);
      if (!result.success) {
        for (const issue of result.error.issues)
          problems.push(`${w.name}/${c.name}: ${issue.path.join(".")} ${issue.message}`);
      }
    }
  }
  return problems;
}

/** Every policy check, by name. */
export const POLICY_CHECKS = {
  images: imageProblems,
  probes: probeProblems,
  resources: resourceProblems,
  security: securityProblems,
  shutdown: shutdownProblems,
  topology: topologyProblems,
  secrets: secretProblems,
  disruption: disruptionProblems,
  network: networkProblems,
  sharedLimits: sharedLimitProblems,
  namespace: (objects: K8sObject[]) => namespaceProblems(objects),
  services: serviceProblems,
  migrations: migrationProblems,
  config: configProblems,
} as const;
