import type { Logger } from "@localdecider/service-kit";
import { upstreamAddress, upstreamAuthorization } from "./address";
import { DEFAULT_UPSTREAM_MAX_BODY } from "./body-limit";
import { DecisionsUpstream } from "./decisions-upstream";
import { OpenAIUpstream } from "./openai-upstream";
import type { PoolServer } from "./pool";
import type { ProtocolSetting } from "./protocol";
import { ModelListProbe } from "./readiness";
import { ServerCheck } from "./server-check";
import { SystemOneUpstream } from "./systemone-upstream";
import type { ModelPort, Protocol, Upstream } from "./types";

export interface ModelServerOptions {
  /** One address of LOCALDECIDER_UPSTREAM, as configured (credentials in it become basic auth). */
  address: string;
  /** LOCALDECIDER_UPSTREAM_MODEL. */
  model: string;
  /** LOCALDECIDER_UPSTREAM_API_KEY. */
  apiKey: string | undefined;
  /** LOCALDECIDER_TIMEOUT in ms: a backstop for each call (the decision's own deadline comes first). */
  timeoutMs: number;
  /** LOCALDECIDER_MAX_INFLIGHT, compared with a llama.cpp server's slots. */
  maxInflight: number;
  allowNoLogprobs: boolean;
  /** LOCALDECIDER_UPSTREAM_PROTOCOL. */
  protocol: ProtocolSetting;
  /** LOCALDECIDER_PACK_PROMPTS: on llama.cpp's chat path, a prompt's probes in one /completion call. */
  packPrompts: boolean;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY: the most bytes read of any one answer (default DEFAULT_UPSTREAM_MAX_BODY). */
  maxBodyBytes?: number;
  /** The least time between two rechecks a 501 asks for (default RECHECK_MIN_GAP_MS). */
  recheckGapMs?: number;
  logger: Logger;
  /** Tests put a recorder in front of the chat adapter. */
  wrapChat?: (chat: Upstream) => Upstream;
}

/**
 * One model server of LOCALDECIDER_UPSTREAM: each protocol's adapter (chat, System One, Decisions) behind the one port, and its start-up
 * check, which finds the protocol it speaks. `upstream` is the adapter of that protocol (the chat adapter
 * until a check found the server speaks System One).
 */
export class ModelServer implements PoolServer {
  readonly id: string;
  readonly probe: ServerCheck;
  readonly chat: OpenAIUpstream;
  readonly native: SystemOneUpstream;
  readonly decisions: DecisionsUpstream;
  private readonly chatPort: Upstream;

  constructor(options: ModelServerOptions) {
    const address = upstreamAddress(options.address);
    const authorization = upstreamAuthorization(options.apiKey, address.basicAuth);
    const { baseURL } = address;
    const { model, timeoutMs } = options;
    const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_UPSTREAM_MAX_BODY;
    this.id = address.display;
    this.chat = new OpenAIUpstream({ baseURL, model, authorization, timeoutMs, maxBodyBytes });
    this.chatPort = options.wrapChat?.(this.chat) ?? this.chat;
    this.native = new SystemOneUpstream({
      baseURL,
      authorization,
      onNotDecisionModel: () => this.probe.recheck(),
      maxBodyBytes,
    });
    this.decisions = new DecisionsUpstream({
      baseURL,
      authorization,
      onNotDecisionModel: () => this.probe.recheck(),
      maxBodyBytes,
    });
    // The start-up checks wait at most 10 s for an answer, whatever the decisions' timeout.
    const checkMs = Math.min(timeoutMs, 10_000);
    const list = new ModelListProbe({ baseURL, model, authorization, timeoutMs: checkMs, maxBodyBytes });
    this.probe = new ServerCheck(list, this.chat, {
      baseURL,
      authorization,
      timeoutMs: checkMs,
      maxBodyBytes,
      ...(options.recheckGapMs === undefined ? {} : { recheckGapMs: options.recheckGapMs }),
      model,
      protocol: options.protocol,
      packPrompts: options.packPrompts,
      maxInflight: options.maxInflight,
      allowNoLogprobs: options.allowNoLogprobs,
      logger: options.logger,
      onProfile: (profile) => {
        this.native.serverKind = profile.kind;
      },
    });
  }

  get upstream(): ModelPort {
    const protocol = this.probe.protocol;
    return protocol === "systemone" ? this.native : protocol === "decisions" ? this.decisions : this.chatPort;
  }

  get protocol(): Protocol | undefined {
    return this.probe.protocol;
  }

  get decisionModels(): readonly string[] {
    return this.probe.protocol === "chat" || this.probe.protocol === undefined ? [] : this.probe.decisionModels;
  }
}
