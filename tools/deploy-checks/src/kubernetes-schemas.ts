import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Service } from "kubernetes-models/v1/Service";
import type { K8sObject } from "./kustomize";

/**
 * Offline schema validation of every object a user would apply, with kubernetes-models (pinned exactly):
 * the Kubernetes OpenAPI schemas compiled into validators, so no cluster and no network is needed.
 *
 * Which Kubernetes: kubernetes-models publishes no build of the 1.32 schemas. 4.5.1 carries 1.33.0's (its
 * changelog: "Update schema version to v1.33.0"; the release before, 4.4.x, carries 1.27's), and 5.x
 * carries 1.36's but is ESM-only and needs Node 22, where this repository supports Node 20.19. So 1.33.0 is
 * the nearest schema set, and API_VERSIONS_IN_1_32 below holds every kind to API versions that 1.32 serves
 * (each of them GA long before it), so nothing newer than 1.32 is used where it matters: the kinds.
 * The KEDA and Prometheus Operator models are those packages' builds of the same generation (KEDA 2.x's
 * ScaledObject, prometheus-operator's ServiceMonitor v1).
 */
interface Model {
  new (data: unknown): { validate(): void };
}

const MODELS: Record<string, Model> = {
  "apps/v1/Deployment": Deployment as unknown as Model,
  "apps/v1/StatefulSet": StatefulSet as unknown as Model,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler as unknown as Model,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy as unknown as Model,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget as unknown as Model,
  "v1/Namespace": Namespace as unknown as Model,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim as unknown as Model,
  "v1/Service": Service as unknown as Model,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject as unknown as Model,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor as unknown as Model,
};

/** Built-in API versions and kinds these files may use: all served by Kubernetes 1.32 (and GA by 1.23). */
export const API_VERSIONS_IN_1_32 = new Set([
  "apps/v1/Deployment",
  "apps/v1/StatefulSet",
  "autoscaling/v2/HorizontalPodAutoscaler",
  "networking.k8s.io/v1/NetworkPolicy",
  "policy/v1/PodDisruptionBudget",
  "v1/Namespace",
  "v1/PersistentVolumeClaim",
  "v1/Service",
]);

/** Custom resources, valid where their operator is installed (components/keda, components/service-monitor). */
export const CUSTOM_RESOURCES = new Set(["keda.sh/v1alpha1/ScaledObject", "monitoring.coreos.com/v1/ServiceMonitor"]);

/** Each object that fails its schema, or is of a kind neither 1.32 nor a known operator serves, with why. */
export function schemaProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    const key = `${o.apiVersion}/${o.kind}`;
    const model = MODELS[key];
    if (model === undefined || !(API_VERSIONS_IN_1_32.has(key) || CUSTOM_RESOURCES.has(key))) {
      problems.push(`${o.kind}/${o.metadata?.name}: ${o.apiVersion} ${o.kind} is not a kind checked here`);
      continue;
    }
    try {
      new model(o).validate();
    } catch (err) {
      problems.push(`${o.kind}/${o.metadata.name}: ${(err as Error).message}`);
    }
  }
  return problems;
}
