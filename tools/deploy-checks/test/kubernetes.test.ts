import { POLICY_CHECKS } from "../src/kubernetes";
import { unknownFieldProblems } from "../src/kubernetes-fields";
import { schemaProblems } from "../src/kubernetes-schemas";
import type { K8sObject } from "../src/kustomize";
import { container, find, render, VARIANTS, type Variant } from "./support/kubernetes";

// deploy/kubernetes (issue 34): every object a user would apply, from each overlay and from overlays with
// the optional components, validated against the Kubernetes schemas offline and held to the policies of
// src/kubernetes.ts. Rendered by this package's own reader of the kustomizations (src/kustomize.ts), so
// that it runs on a Node-only machine; test/kustomize-reader.test.ts holds the reader to kubectl.

const rendered = new Map(VARIANTS.map((v) => [v.name, render(v)]));
const objectsOf = (name: string) => structuredClone(rendered.get(name) as K8sObject[]);

describe.each(VARIANTS.map((v) => [v.name, v] as [string, Variant]))("%s", (name) => {
  it("renders only objects valid against the Kubernetes schemas (1.33.0's, kinds served by 1.32)", () => {
    expect(schemaProblems(objectsOf(name))).toStrictEqual([]);
  });

  it("declares no field the schemas do not know (kubectl apply's strict field validation)", () => {
    expect(unknownFieldProblems(objectsOf(name))).toStrictEqual([]);
  });

  it.each(Object.keys(POLICY_CHECKS))("keeps the %s policy", (check) => {
    expect(POLICY_CHECKS[check as keyof typeof POLICY_CHECKS](objectsOf(name))).toStrictEqual([]);
  });
});

describe("every overlay", () => {
  it("runs both services behind their Services, and the decider's model (a server, or its own engine)", () => {
    for (const v of VARIANTS) {
      const ids = rendered.get(v.name)?.map((o) => `${o.kind}/${o.metadata.name}`) ?? [];
      expect({ v: v.name, ids }).toStrictEqual({
        v: v.name,
        ids: expect.arrayContaining(["Deployment/todos", "Service/todos", "Deployment/decider", "Service/decider"]),
      });
      const decider = container(find(rendered.get(v.name) as K8sObject[], "Deployment", "decider"));
      const upstream = decider.env.find((e: { name: string }) => e.name === "LOCALDECIDER_UPSTREAM")?.value;
      if (upstream !== undefined) expect(ids).toContain(`Service/${new URL(upstream).hostname}`);
    }
  });

  it("embedded: one decider, no model server and no Redis; the others: Redis and an autoscaler up to several", () => {
    const embedded = objectsOf("embedded");
    expect(embedded.filter((o) => ["model", "redis"].includes(o.metadata.name))).toStrictEqual([]);
    expect(find(embedded, "Deployment", "decider").spec.replicas).toBe(1);
    for (const name of ["llama-server", "native", "gpu"]) {
      const objects = objectsOf(name);
      expect(find(objects, "HorizontalPodAutoscaler", "decider").spec.maxReplicas).toBeGreaterThan(1);
      expect(find(objects, "Deployment", "redis")).toBeDefined();
    }
  });

  it("gpu: the model server asks for one NVIDIA GPU, on GPU nodes, tolerating their taint", () => {
    const model = find(objectsOf("gpu"), "Deployment", "model");
    expect(container(model).resources.limits["nvidia.com/gpu"]).toBe(1);
    expect(model.spec.template.spec.nodeSelector).toStrictEqual({ "nvidia.com/gpu.present": "true" });
    expect(model.spec.template.spec.tolerations).toStrictEqual([
      { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
    ]);
  });

  it("native: the decider asks the decision model by System One for the name the server lists", () => {
    const objects = objectsOf("native");
    const env = Object.fromEntries(
      container(find(objects, "Deployment", "decider")).env.map((e: { name: string; value?: string }) => [
        e.name,
        e.value,
      ]),
    );
    const args = container(find(objects, "Deployment", "model")).args as string[];
    expect(env.LOCALDECIDER_UPSTREAM_PROTOCOL).toBe("systemone");
    expect(args[args.indexOf("--alias") + 1]).toBe(env.LOCALDECIDER_UPSTREAM_MODEL);
  });

  it("keda: the ScaledObject replaces the CPU autoscaler and scales on the summed queue, a floor of 2, up fast, down slowly", () => {
    const objects = objectsOf("llama-server + keda, service-monitor, postgres");
    expect(objects.filter((o) => o.kind === "HorizontalPodAutoscaler").map((o) => o.metadata.name)).toStrictEqual([
      "todos",
    ]);
    const scaled = find(objects, "ScaledObject", "decider").spec;
    expect(scaled.triggers[0].metadata.query).toMatch(/^sum\(decider_queue_length\{/);
    expect(scaled.minReplicaCount).toBe(2);
    const behavior = scaled.advanced.horizontalPodAutoscalerConfig.behavior;
    expect(behavior.scaleUp.stabilizationWindowSeconds).toBe(0);
    expect(behavior.scaleDown.stabilizationWindowSeconds).toBeGreaterThanOrEqual(300);
  });
});

/** Breaks one rule in a copy of a variant's objects; the named check must then report a problem. */
interface Mutation {
  check: keyof typeof POLICY_CHECKS | "schema" | "fields";
  variant: string;
  what: string;
  mutate(objects: K8sObject[]): K8sObject[] | undefined;
}

const FULL = "llama-server + keda, service-monitor, postgres";
const dep = (o: K8sObject[], name: string) => find(o, "Deployment", name);

const MUTATIONS: Mutation[] = [
  {
    check: "fields",
    variant: "llama-server",
    what: "a misspelt field of a topology spread",
    mutate: (o) => {
      dep(o, "todos").spec.template.spec.topologySpreadConstraints[0].whenUnsatisfiabel = "DoNotSchedule";
    },
  },
  {
    check: "fields",
    variant: "llama-server",
    what: "a misspelt metadata field",
    mutate: (o) => {
      find(o, "Service", "decider").metadata.label = { a: "b" };
    },
  },
  {
    check: "fields",
    variant: FULL,
    what: "a field a ScaledObject does not have",
    mutate: (o) => {
      find(o, "ScaledObject", "decider").specs = {};
    },
  },
  {
    check: "schema",
    variant: "llama-server",
    what: "a Deployment without its selector",
    mutate: (o) => {
      delete dep(o, "todos").spec.selector;
    },
  },
  {
    check: "schema",
    variant: "llama-server",
    what: "a port that is not a number",
    mutate: (o) => {
      container(dep(o, "decider")).ports[0].containerPort = "http";
    },
  },
  {
    check: "schema",
    variant: FULL,
    what: "a ScaledObject without its target",
    mutate: (o) => {
      delete find(o, "ScaledObject", "decider").spec.scaleTargetRef;
    },
  },
  {
    check: "schema",
    variant: "llama-server",
    what: "a kind 1.32 does not serve in that version",
    mutate: (o) => {
      find(o, "HorizontalPodAutoscaler", "todos").apiVersion = "autoscaling/v2beta2";
    },
  },
  {
    check: "images",
    variant: FULL,
    what: "postgres at a tag only",
    mutate: (o) => {
      container(find(o, "StatefulSet", "postgres")).image = "postgres:16-bookworm";
    },
  },
  {
    check: "images",
    variant: "llama-server",
    what: "a llama.cpp tag not listed",
    mutate: (o) => {
      container(dep(o, "model")).image = "ghcr.io/ggml-org/llama.cpp:server-b99999";
    },
  },
  {
    check: "images",
    variant: "llama-server",
    what: "todos at another version than its package",
    mutate: (o) => {
      container(dep(o, "todos")).image = "localdecider/todos:9.9.9";
    },
  },
  {
    check: "probes",
    variant: "llama-server",
    what: "todos without readiness",
    mutate: (o) => {
      delete container(dep(o, "todos")).readinessProbe;
    },
  },
  {
    check: "probes",
    variant: "llama-server",
    what: "decider liveness on /ready",
    mutate: (o) => {
      container(dep(o, "decider")).livenessProbe.httpGet.path = "/ready";
    },
  },
  {
    check: "probes",
    variant: "llama-server",
    what: "a model server given 100 s to download and load",
    mutate: (o) => {
      container(dep(o, "model")).startupProbe.failureThreshold = 10;
    },
  },
  {
    check: "probes",
    variant: "embedded",
    what: "the embedded decider's startup on /health (the download not waited for)",
    mutate: (o) => {
      container(dep(o, "decider")).startupProbe.httpGet.path = "/health";
    },
  },
  {
    check: "resources",
    variant: "llama-server",
    what: "the migrate init container without a memory limit",
    mutate: (o) => {
      delete container(dep(o, "todos"), "migrate").resources.limits.memory;
    },
  },
  {
    check: "resources",
    variant: "gpu",
    what: "the model server without CPU requests",
    mutate: (o) => {
      delete container(dep(o, "model")).resources.requests.cpu;
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "a writable root filesystem",
    mutate: (o) => {
      container(dep(o, "decider")).securityContext.readOnlyRootFilesystem = false;
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "capabilities kept",
    mutate: (o) => {
      container(dep(o, "redis")).securityContext.capabilities.drop = [];
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "privilege escalation allowed",
    mutate: (o) => {
      container(dep(o, "model")).securityContext.allowPrivilegeEscalation = true;
    },
  },
  {
    check: "security",
    variant: FULL,
    what: "no seccomp profile",
    mutate: (o) => {
      delete find(o, "StatefulSet", "postgres").spec.template.spec.securityContext.seccompProfile;
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "user 0",
    mutate: (o) => {
      container(dep(o, "todos")).securityContext.runAsUser = 0;
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "root allowed",
    mutate: (o) => {
      delete dep(o, "todos").spec.template.spec.securityContext.runAsNonRoot;
      delete container(dep(o, "todos")).securityContext.runAsNonRoot;
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "a capability added",
    mutate: (o) => {
      container(dep(o, "todos"), "migrate").securityContext.capabilities.add = ["NET_RAW"];
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "a mount of no volume",
    mutate: (o) => {
      dep(o, "todos").spec.template.spec.volumes = [];
    },
  },
  {
    check: "security",
    variant: "llama-server",
    what: "the service account token mounted",
    mutate: (o) => {
      delete dep(o, "decider").spec.template.spec.automountServiceAccountToken;
    },
  },
  {
    check: "shutdown",
    variant: "llama-server",
    what: "a grace period shorter than the decider's drain",
    mutate: (o) => {
      dep(o, "decider").spec.template.spec.terminationGracePeriodSeconds = 60;
    },
  },
  {
    check: "shutdown",
    variant: "llama-server",
    what: "LOCALDECIDER_TIMEOUT raised past the grace period",
    mutate: (o) => {
      container(dep(o, "decider")).env.push({ name: "LOCALDECIDER_TIMEOUT", value: "600" });
    },
  },
  {
    check: "shutdown",
    variant: "llama-server",
    what: "todos without a preStop",
    mutate: (o) => {
      delete container(dep(o, "todos")).lifecycle;
    },
  },
  {
    check: "topology",
    variant: "llama-server",
    what: "todos without topology spread",
    mutate: (o) => {
      delete dep(o, "todos").spec.template.spec.topologySpreadConstraints;
    },
  },
  {
    check: "topology",
    variant: "llama-server",
    what: "a spread over another app's pods",
    mutate: (o) => {
      dep(o, "redis").spec.template.spec.topologySpreadConstraints[0].labelSelector.matchLabels = {
        "app.kubernetes.io/name": "todos",
      };
    },
  },
  {
    check: "secrets",
    variant: "llama-server",
    what: "a Secret written in the manifests",
    mutate: (o) =>
      void o.push({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "redis", namespace: "localdecider" },
        stringData: { password: "x" },
      }),
  },
  {
    check: "secrets",
    variant: "llama-server",
    what: "an API key as a literal",
    mutate: (o) => {
      container(dep(o, "decider")).env.find((e: { name: string }) => e.name === "LOCALDECIDER_API_KEY").value = "k";
    },
  },
  {
    check: "secrets",
    variant: "llama-server",
    what: "a password inside the Redis URL",
    mutate: (o) => {
      container(dep(o, "decider")).env.find((e: { name: string }) => e.name === "LOCALDECIDER_REDIS_URL").value =
        "redis://:hunter2@redis:6379";
    },
  },
  {
    check: "secrets",
    variant: "llama-server",
    what: "the URL's $(VAR) not from a Secret",
    mutate: (o) => {
      container(dep(o, "decider")).env.find((e: { name: string }) => e.name === "REDIS_PASSWORD").value = "x";
    },
  },
  {
    check: "disruption",
    variant: "llama-server",
    what: "Redis without a PodDisruptionBudget",
    mutate: (o) => o.filter((x) => !(x.kind === "PodDisruptionBudget" && x.metadata.name === "redis")),
  },
  {
    check: "disruption",
    variant: "llama-server",
    what: "a budget that allows no eviction",
    mutate: (o) => {
      find(o, "PodDisruptionBudget", "todos").spec.maxUnavailable = 0;
    },
  },
  {
    check: "network",
    variant: "llama-server",
    what: "the model server without a NetworkPolicy",
    mutate: (o) => o.filter((x) => !(x.kind === "NetworkPolicy" && x.metadata.name === "model")),
  },
  {
    check: "network",
    variant: FULL,
    what: "Postgres open to the decider too",
    mutate: (o) =>
      void find(o, "NetworkPolicy", "postgres").spec.ingress[0].from.push({
        podSelector: { matchLabels: { "app.kubernetes.io/name": "decider" } },
      }),
  },
  {
    check: "network",
    variant: "llama-server",
    what: "Redis open to any pod",
    mutate: (o) => {
      delete find(o, "NetworkPolicy", "redis").spec.ingress[0].from;
    },
  },
  {
    check: "network",
    variant: "llama-server",
    what: "the model server open to an address block",
    mutate: (o) => {
      find(o, "NetworkPolicy", "model").spec.ingress[0].from = [{ ipBlock: { cidr: "0.0.0.0/0" } }];
    },
  },
  {
    check: "sharedLimits",
    variant: "llama-server",
    what: "an autoscaled decider without LOCALDECIDER_REDIS_URL",
    mutate: (o) => {
      container(dep(o, "decider")).env = container(dep(o, "decider")).env.filter(
        (e: { name: string }) => e.name !== "LOCALDECIDER_REDIS_URL",
      );
    },
  },
  {
    check: "sharedLimits",
    variant: "embedded",
    what: "three embedded replicas without Redis",
    mutate: (o) => {
      dep(o, "decider").spec.replicas = 3;
    },
  },
  {
    check: "sharedLimits",
    variant: "embedded",
    what: "a KEDA ScaledObject up to 4 over a decider without Redis",
    mutate: (o) =>
      void o.push({
        apiVersion: "keda.sh/v1alpha1",
        kind: "ScaledObject",
        metadata: { name: "decider" },
        spec: { scaleTargetRef: { name: "decider" }, maxReplicaCount: 4 },
      }),
  },
  {
    check: "namespace",
    variant: "llama-server",
    what: "an object outside the namespace",
    mutate: (o) => {
      delete find(o, "Service", "model").metadata.namespace;
    },
  },
  {
    check: "namespace",
    variant: "llama-server",
    what: "a namespace without Pod Security",
    mutate: (o) => {
      find(o, "Namespace", "localdecider").metadata.labels = {};
    },
  },
  {
    check: "services",
    variant: "llama-server",
    what: "a Service to a port no container names",
    mutate: (o) => {
      find(o, "Service", "decider").spec.ports[0].targetPort = "web";
    },
  },
  {
    check: "services",
    variant: "llama-server",
    what: "a Service selecting no pods",
    mutate: (o) => {
      find(o, "Service", "redis").spec.selector = { "app.kubernetes.io/name": "cache" };
    },
  },
  {
    check: "migrations",
    variant: "llama-server",
    what: "todos without its migrate init container",
    mutate: (o) => {
      delete dep(o, "todos").spec.template.spec.initContainers;
    },
  },
  {
    check: "migrations",
    variant: "llama-server",
    what: "migrations from another image",
    mutate: (o) => {
      container(dep(o, "todos"), "migrate").image = "localdecider/todos:0.0.9";
    },
  },
  {
    check: "config",
    variant: "embedded",
    what: "LOCALDECIDER_REDIS_URL with the embedded engine",
    mutate: (o) =>
      void container(dep(o, "decider")).env.push({ name: "LOCALDECIDER_REDIS_URL", value: "redis://redis:6379" }),
  },
  {
    check: "config",
    variant: "llama-server",
    what: "a decider timeout that is not a number",
    mutate: (o) => {
      container(dep(o, "decider")).env.push({ name: "LOCALDECIDER_TIMEOUT", value: "three minutes" });
    },
  },
  {
    check: "config",
    variant: "llama-server",
    what: "a todos port out of range",
    mutate: (o) => {
      container(dep(o, "todos")).env.find((e: { name: string }) => e.name === "TODOS_PORT").value = "70000";
    },
  },
];

describe("each check fails when its rule is broken", () => {
  it.each(MUTATIONS.map((m) => [m.check, m.what, m] as [string, string, Mutation]))("%s: %s", (_check, _what, m) => {
    const objects = objectsOf(m.variant);
    const run =
      m.check === "schema" ? schemaProblems : m.check === "fields" ? unknownFieldProblems : POLICY_CHECKS[m.check];
    expect(run(objects)).toStrictEqual([]);
    const mutated = m.mutate(objects) ?? objects;
    expect(run(mutated).length).toBeGreaterThan(0);
  });

  it("covers every check", () => {
    expect([...new Set(MUTATIONS.map((m) => m.check))].sort()).toStrictEqual(
      ["schema", "fields", ...Object.keys(POLICY_CHECKS)].sort(),
    );
  });
});
