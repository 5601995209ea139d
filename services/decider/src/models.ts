import type { ModelCard } from "@localdecider/contracts/decider";
import { RELEASE_DATE, SERVICE_VERSION } from "./version";

/** Our own model name. */
export const MODEL_NAME = "localdecider";
/**
 * Names of TypeSafe's hosted models that clients written for it send (the SDK's default is `jev-latest`);
 * they are served by this service's one model so that only `baseURL` needs to change.
 */
export const MODEL_ALIASES = ["jev-latest", "jev"] as const;

/** The names a request's `model` may give. */
export const ACCEPTED_MODELS: readonly string[] = [MODEL_NAME, ...MODEL_ALIASES];

export function modelCards(upstreamModel: string): ModelCard[] {
  const description = `Local System One decisions from token logprobs of ${upstreamModel} (localdecider ${SERVICE_VERSION}).`;
  return [
    { name: MODEL_NAME, description, release_date: RELEASE_DATE },
    ...MODEL_ALIASES.map((name) => ({
      name,
      description: `Alias of ${MODEL_NAME} for clients of TypeSafe's hosted API. ${description}`,
      release_date: RELEASE_DATE,
    })),
  ];
}

/**
 * Cards for the decision models a native model server lists (llama.cpp's router mode and Ollama hold several):
 * a client may name one, and its questions go to that model. Our own names are not repeated.
 */
export function decisionModelCards(names: readonly string[], own: readonly ModelCard[]): ModelCard[] {
  const taken = new Set(own.map((card) => card.name));
  return names
    .filter((name) => !taken.has(name))
    .map((name) => ({
      name,
      description: `Decision model ${name} on the model server, answering System One itself, through localdecider ${SERVICE_VERSION}.`,
      release_date: RELEASE_DATE,
    }));
}

/** The `model` of every answer: the service version and the upstream model, e.g. `localdecider-0.1.0/qwen2.5`. */
export function servedModelName(upstreamModel: string): string {
  return `${MODEL_NAME}-${SERVICE_VERSION}/${upstreamModel}`;
}
