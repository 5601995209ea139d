import { sharedConfigDocs } from "@localdecider/service-kit";
import type { configSchema } from "./config";

/**
 * What each variable of the decider config schema means, for people: the one text of the configuration
 * reference, docs/configuration.md, which `pnpm docs:gen` writes from this map and the schema (name, default,
 * accepted values). Keyed by the schema's own variables, so a variable added to the schema without a line
 * here, or a line left after its variable went, fails the typecheck. Links are relative to docs/.
 */
export const CONFIG_DOCS: Record<keyof typeof configSchema.shape, string> = {
  LOCALDECIDER_HOST: "Listen address.",
  LOCALDECIDER_PORT: "Listen port (0 picks a free one).",
  LOCALDECIDER_ALLOWED_HOSTS:
    "Host names the decider answers for besides `localhost`, `127.0.0.1`, `[::1]` and a specific `LOCALDECIDER_HOST` (never `0.0.0.0`/`::`), each with any port: a comma list of names (`decider`, `decider.example.com`), addresses (`10.0.0.5`, `[fd00::1]`) and domains (`.example.com`: it and every name under it), or `*` for any name. A request for another name gets 421 `host_not_allowed` (not `/health`, `/ready`, `/metrics`): it keeps a web page on a rebound DNS name from using the decider through a browser ([Host check](security.md#host-check-dns-rebinding)). On without `LOCALDECIDER_API_KEY`; with a key only when this is set.",
  LOCALDECIDER_CORS_ORIGINS:
    "Browser origins that may call the API from a web page (CORS): a comma list of exact origins, `scheme://host[:port]` (`https://app.example.com`, `http://localhost:5173`); `*` and paths are refused. A listed origin gets `Access-Control-Allow-Origin` (its own), its preflights 204 with the methods and headers allowed (`authorization`, `content-type`, `x-request-id`, `x-typesafe-request-id`), and may read `x-request-id`, `Location`, `Retry-After`, `WWW-Authenticate`, `Allow`. Unset (the default): no CORS header at all. No credentials mode (bearer tokens, never cookies).",
  LOCALDECIDER_PLAYGROUND:
    "`true` serves the decision playground at `GET /playground` (a page for trying questions: [playground.md](playground.md)); `false` makes it a 404. Unset: on only when `LOCALDECIDER_HOST` is a loopback address (`127.x.y.z`, `::1`, `localhost`), so off in the Docker image and under compose (`0.0.0.0`).",
  LOCALDECIDER_UPSTREAM:
    "Set: the address of an OpenAI-compatible model server, **without** `/v1` (a trailing `/v1` or `/` is accepted), e.g. `http://127.0.0.1:8081` for llama.cpp `llama-server --port 8081`; or several, separated by commas (`http://a:8081,http://b:8081`, at most 64, each once; a comma in a password is written `%2C`): each gets its own `MAX_INFLIGHT`, one request's calls go to one server, requests go to the least loaded, a failed server leaves the rotation (see [Several model servers](scaling.md#several-model-servers)). Unset: the **embedded engine** runs `LOCALDECIDER_MODEL` in this process (see [Embedded engine](embedded-engine.md)).",
  LOCALDECIDER_UPSTREAM_MODEL:
    "Server mode: model name sent upstream; must equal the name the server lists at `GET /v1/models` (e.g. llama.cpp `--alias`, vLLM `--served-model-name`, Ollama `qwen2.5:1.5b`).",
  LOCALDECIDER_UPSTREAM_PROTOCOL:
    "Server mode: how each model server is asked. `auto` finds out at its start-up check, from what it publishes (llama.cpp lists `\"decisions\"` in `/v1/models` `output_modalities`, Ollama `decision` in `/api/show` capabilities) or one `POST /v1/systemone` probe: a decision model is asked natively (it answers `POST /v1/systemone` itself, see [Native System One servers](compatibility.md#native-system-one-servers)), anything else through chat logprobs, and OpenAI's `POST /v1/decisions` only as a last resort. `systemone`, `chat` or `decisions` takes that one (`systemone` and `decisions` still probe, so a server that cannot answer is not ready; SGLang's own `/v1/decisions` dialect is refused: [upstreams.md](upstreams.md)). `/ready` and `/v1/models` show each server's protocol.",
  LOCALDECIDER_UPSTREAM_API_KEY:
    "Server mode: the key sent to every model server as `Authorization: Bearer <key>` (on its start-up check, its readiness checks and every call). Unset: no `Authorization` header is sent at all (the local servers need none). Refused beside credentials in `LOCALDECIDER_UPSTREAM` (sent as basic auth), and without `LOCALDECIDER_UPSTREAM` (the embedded engine takes no key). Never logged or shown.",
  LOCALDECIDER_MODEL:
    "Embedded engine: a GGUF file path, an `http(s)` URL, or `hf:<user>/<repo>/<file>.gguf` (optionally `#<branch>`, a plain ref name). Default `hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf`. A URL or `hf:` URI is downloaded into `LOCALDECIDER_MODELS_DIR`, and checked before every load ([what is checked](embedded-engine.md#model-downloads-what-is-checked)). A URL's credentials (`https://user:pass@host/m.gguf`) are sent as basic auth to its own origin only, and shown nowhere. A malformed URL, or an `hf:` URI that could leave its repository, stops the boot. A missing path stops the start ([more](embedded-engine.md#hub-mirror-proxy)).",
  LOCALDECIDER_MODELS_DIR:
    "Embedded engine: where downloads are kept, under the source's host and path (with a query: in a folder `query-<hash>`), each beside `<file>.verified.json`, the record of its verified download; symlinks at a model's name or its `.part` are not followed. Default `$XDG_CACHE_HOME/localdecider/models` (`~/.cache/...` on Linux), `~/Library/Caches/localdecider/models` (macOS), `%LOCALAPPDATA%\\localdecider\\models` (Windows).",
  LOCALDECIDER_MODEL_SHA256:
    "Embedded engine: the SHA-256 the model file must have, checked after a download and before every load, of a downloaded file or a plain path (a full read on every start: about 2 s per GB here). Unset: a download is checked against the hash the hub states (Hugging Face's `X-Linked-ETag`), if any, and a kept file against the hash recorded at its download. Size and GGUF header are always checked.",
  LOCALDECIDER_GPU:
    "Embedded engine: `auto` lets node-llama-cpp use CUDA, Vulkan or Metal when it finds one (and its binary is installed), else the CPU; `cpu` never uses a GPU. The backend chosen is logged and shown at `/v1/models`.",
  LOCALDECIDER_CONTEXT_SIZE:
    "Embedded engine: tokens each sequence holds, i.e. the longest prompt (state + `QUESTIONS_PER_CALL` questions + answer) one call can have; `auto` is the model's training context, at most 8192 (a 255-label choice with short descriptions and a state of ~3,000 tokens fits). The context holds `MAX_INFLIGHT` such sequences.",
  LOCALDECIDER_THREADS:
    "Embedded engine: CPU threads per evaluation; `0` = one per math core of the machine (never more: threads beyond the cores spin against each other, measured 250× slower here). On a busy machine or with a tiny model, `1` is fastest.",
  LOCALDECIDER_STATE_CACHE_MIB:
    "Embedded engine: MiB for recent states kept beyond the `MAX_INFLIGHT` sequences, so that a state asked again (the same diff, the same ticket) is read from memory instead of evaluated again. Each kept state is one sequence's KV cache (224 MiB for Qwen2.5-1.5B at 8192 tokens), at most 4. `0`: none kept. What a request reused is reported (`X-Cached-Tokens` on System One, `cached_tokens` on Decisions): [performance-prompt.md](performance-prompt.md).",
  LOCALDECIDER_API_KEY:
    'When set, the `/v1` routes (`auth: "bearer"` in their contracts) require `Authorization: Bearer <key>` (constant-time compare; see [Bearer header](security.md#bearer-header): a key outside its token characters stops the start). `/health` and `/ready` stay open (a caller sending the key\'s bearer there sees the internal addresses the others do not: [What the open endpoints show](security.md#what-the-open-endpoints-show)). When unset, any bearer is accepted, and the [Host check](security.md#host-check-dns-rebinding) is on.',
  LOCALDECIDER_TIMEOUT:
    "Seconds one decision may take in all: its queued calls, its calls and their retries share this one deadline; past it the calls still running are aborted, those still queued never start, and the request answers 504.",
  LOCALDECIDER_MAX_INFLIGHT:
    "Requests running at once on each model server, each holding one slot for all of its calls: set it to the server's slots (llama.cpp `--parallel`; the decider warns when they differ). The embedded engine gets this many sequences.",
  LOCALDECIDER_MAX_QUEUE:
    "Upstream calls of the requests admitted and not yet finished, across replicas with Redis. A request needs one call per question (a choice of over 20 labels one per 20 labels, plus one), so this also caps a request's questions; one whose calls do not all fit gets 429 before anything runs, and one that needs more calls than `MAX_QUEUE` at all gets 413 `too_many_questions`.",
  LOCALDECIDER_MAX_QUESTIONS:
    "Questions one request may hold; more is refused with 413 `too_many_questions` before any question is read (llama.cpp's `llama-server` refuses more than 4096 with 413 too). `MAX_QUEUE` may refuse fewer (above).",
  LOCALDECIDER_REDIS_URL:
    "Set (`redis://[:password@]host:port[/db]` or `rediss://`): every replica with this Redis and prefix shares the limits: at most `MAX_INFLIGHT` calls running on each model server and at most `MAX_QUEUE` queued, across all replicas (see [Replicas sharing one limit](scaling.md#replicas-sharing-one-limit-redis)). Requires `LOCALDECIDER_UPSTREAM`. Unset: this process's limits alone; no Redis client is loaded.",
  LOCALDECIDER_REDIS_PREFIX:
    "Start of every Redis key and channel (1-100 of `A-Za-z0-9_-.:`): deployments sharing one Redis keep apart by it; replicas of one deployment must use the same.",
  LOCALDECIDER_REDIS_LEASE_MS:
    "Milliseconds after which a replica not heard from (killed, frozen, cut off from Redis) loses its reservations; each replica renews its lease every third of it. 1000-600000; keep it longer than any pause of a replica.",
  LOCALDECIDER_MALFORMED_RETRIES:
    "Retries of a call whose response is malformed (no choice in it; or, with `ALLOW_NO_LOGPROBS`, an emitted token that begins no single outcome); then 502 `upstream_malformed`.",
  LOCALDECIDER_MAX_OUTPUT_TOKENS:
    "Not used since prompt version 2 (every call decodes exactly one token); still validated so that existing configurations boot.",
  LOCALDECIDER_QUESTIONS_PER_CALL:
    "Most questions (or choice chunks) rendered in one prompt. Each question is still its own call (probed at its own value), and the calls of one prompt share its prefix, which the server's prompt cache evaluates once per slot.",
  LOCALDECIDER_OUTCOMES_PER_CALL:
    "Most outcomes rendered in one prompt (noul 2, choice 1 per label, score 1 per level). At least 20.",
  LOCALDECIDER_ALLOW_NO_LOGPROBS:
    "A backend that sends no logprobs fails every decision with 502 `no_logprobs`. `true`: answer with the emitted outcome at probability 1 instead.",
  LOCALDECIDER_PACK_PROMPTS:
    "On a llama.cpp server: each prompt's questions go in **one** `/completion` call, the prompt rendered by the server's own template once and tokenized once, once the start-up check has verified that this gives the same prompt tokens and the same alternatives as a chat call (see [One call per prompt on llama.cpp](how-answers-are-computed.md#one-call-per-prompt-on-llamacpp)); a server where it does not (an older build without `/apply-template`, a template that rewrites the prefill) stays on chat calls, with a warning. `false`: one chat call per question. Other servers are not affected.",
  LOCALDECIDER_BODY_LIMIT:
    "Request body limit, with units: `512kb`, `2mb`, `2m`, `1.5 MB` (powers of 1024, any case); a bare number is bytes, and anything below 1 KiB is refused at boot (so `2m` can never mean 2 bytes). Larger bodies get 413.",
  LOCALDECIDER_UPSTREAM_MAX_BODY:
    "Server mode: the most bytes read of any one answer of a model server (decisions, model lists, start-up checks), with units as `LOCALDECIDER_BODY_LIMIT`; at least `64kb`. Past it the call is aborted and answered 502 `upstream_malformed`, and the server stays in rotation ([upstream-hardening.md](upstream-hardening.md)).",
  LOCALDECIDER_CALIBRATION:
    "Calibration file from `pnpm decider eval --fit` ([calibration.md](calibration.md)): every answer is temperature-scaled before `score`, `confidence` and `choice` are derived; `GET /v1/models` shows it. A malformed or missing file stops the start. A relative path is read from the directory the command was run in (see below).",
  LOG_LEVEL:
    "`error`, `warn`, `info`, `http`, `verbose`, `debug`, `silly` or `silent`. JSON lines on stdout, each with the request id; never the state or a key.",
  ...sharedConfigDocs("LOCALDECIDER"),
};
