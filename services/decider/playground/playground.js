// The decision playground: one page, no framework, no build step, nothing loaded from elsewhere.
// Everything it shows from a response is written as text (textContent), never as HTML.
// The API key lives in the `apiKey` variable below only: never in localStorage, sessionStorage or a cookie,
// and never in the code samples (they read $LOCALDECIDER_API_KEY / process.env instead).

(() => {
  /** The API key for this tab, from the key field; forgotten when the tab closes or reloads. */
  let apiKey = "";
  /** Whether the decider asked for a key (a 401): the code samples then send one. */
  let keyRequired = false;
  let nextId = 1;
  let sending = false;

  const EXAMPLE_STATE =
    "Hi, I was charged twice for my subscription this month and nobody has answered my two emails. " +
    "Please refund one of the charges today, or I will cancel.";

  /** One question of each type, so that Send answers at once. */
  const EXAMPLE_QUESTIONS = [
    {
      type: "noul",
      name: "billing",
      instructions: "Is this message about billing or payments?",
      yes: "",
      no: "",
    },
    {
      type: "choice",
      name: "tone",
      instructions: "What is the customer's tone?",
      options: [
        { label: "calm", description: "polite and patient" },
        { label: "frustrated", description: "annoyed but civil" },
        { label: "angry", description: "hostile, threatening or shouting" },
      ],
    },
    {
      type: "score",
      name: "urgency",
      instructions: "How urgent is this ticket?",
      levels: ["can wait a week", "should be handled this week", "needs an answer today"],
    },
  ];

  const TYPE_TITLES = { noul: "Yes / no", choice: "Choice", score: "Score" };

  /** The questions as edited, in order. */
  const questions = EXAMPLE_QUESTIONS.map((q) => withId(structuredClone(q)));

  const $ = (id) => document.getElementById(id);

  function withId(q) {
    q.id = nextId++;
    return q;
  }

  /** A small element builder: h("p", { class: "hint" }, "text", child). Text is always text. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs ?? {})) {
      if (value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (key === "value") el.value = value;
      else el.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return el;
  }

  const dialect = () => document.querySelector('input[name="dialect"]:checked').value;
  const stateFormat = () => document.querySelector('input[name="state-format"]:checked').value;

  /** The page's own base URL (it may be served under a path prefix): API paths are relative to it. */
  const baseUrl = () => new URL(".", window.location.href).href.replace(/\/$/, "");

  // ---- the question editor ------------------------------------------------------------------------------

  function field(labelText, control, hint) {
    const id = `f${nextId++}`;
    control.id = id;
    return h("div", { class: "field" }, h("label", { for: id, text: labelText }), control, hint);
  }

  function textInput(value, onInput, attrs = {}) {
    return h("input", { type: "text", value, spellcheck: "false", oninput: (e) => onInput(e.target.value), ...attrs });
  }

  function removeButton(label, onClick) {
    return h(
      "button",
      { type: "button", class: "icon-button", "aria-label": label, title: label, onclick: onClick },
      "×",
    );
  }

  function questionLabel(q, index) {
    return q.name.trim() === "" ? `question ${index + 1}` : `question ${q.name.trim()}`;
  }

  function renderQuestions(focus) {
    const list = $("questions");
    list.replaceChildren(...questions.map((q, i) => questionCard(q, i)));
    $("question-count").textContent = `${questions.length} ${questions.length === 1 ? "question" : "questions"}`;
    if (focus !== undefined) document.querySelector(focus)?.focus();
    updateCode();
  }

  function questionCard(q, index) {
    const card = h("article", {
      class: `question question-${q.type}`,
      "data-question": String(q.id),
      "aria-label": `${TYPE_TITLES[q.type]} ${questionLabel(q, index)}`,
    });
    const head = h(
      "div",
      { class: "question-head" },
      h("span", { class: `badge badge-${q.type}`, text: TYPE_TITLES[q.type] }),
      h("span", { class: "question-index", text: `#${index + 1}` }),
      h("span", { class: "spacer" }),
      removeButton(`Remove ${questionLabel(q, index)}`, () => removeQuestion(q.id)),
    );
    const name = field(
      "Name",
      textInput(
        q.name,
        (v) => {
          q.name = v;
          updateCode();
        },
        { "data-part": "name", autocomplete: "off" },
      ),
    );
    const instructions = field(
      "Instructions",
      h("textarea", {
        rows: "2",
        value: q.instructions,
        "data-part": "instructions",
        oninput: (e) => {
          q.instructions = e.target.value;
          updateCode();
        },
      }),
    );
    card.append(head, h("div", { class: "question-grid" }, name, instructions));
    if (q.type === "noul") card.append(noulCriteria(q));
    if (q.type === "choice") card.append(choiceOptions(q));
    if (q.type === "score") card.append(scoreLevels(q));
    return card;
  }

  function noulCriteria(q) {
    const yes = field(
      "Yes means (optional)",
      textInput(
        q.yes,
        (v) => {
          q.yes = v;
          updateCode();
        },
        { "data-part": "yes" },
      ),
    );
    const no = field(
      "No means (optional)",
      textInput(
        q.no,
        (v) => {
          q.no = v;
          updateCode();
        },
        { "data-part": "no" },
      ),
    );
    return h("div", { class: "question-grid" }, yes, no);
  }

  function choiceOptions(q) {
    const rows = q.options.map((option, i) =>
      h(
        "li",
        { class: "option-row" },
        textInput(
          option.label,
          (v) => {
            option.label = v;
            updateCode();
          },
          { "aria-label": `Option ${i + 1} label`, placeholder: "label", "data-part": `label-${i}` },
        ),
        textInput(
          option.description,
          (v) => {
            option.description = v;
            updateCode();
          },
          { "aria-label": `Option ${i + 1} description`, placeholder: "description (optional)" },
        ),
        removeButton(`Remove option ${i + 1}`, () => {
          q.options.splice(i, 1);
          renderQuestions(`[data-question="${q.id}"] [data-add-option]`);
        }),
      ),
    );
    return h(
      "div",
      { class: "criteria" },
      h("div", { class: "criteria-title", text: "Options" }),
      h("ol", { class: "rows" }, rows),
      h(
        "button",
        {
          type: "button",
          class: "link-button",
          "data-add-option": "",
          onclick: () => {
            q.options.push({ label: "", description: "" });
            renderQuestions(`[data-question="${q.id}"] [data-part="label-${q.options.length - 1}"]`);
          },
        },
        "Add option",
      ),
    );
  }

  function scoreLevels(q) {
    const rows = q.levels.map((level, i) =>
      h(
        "li",
        { class: "level-row" },
        h("span", { class: "level-number", "aria-hidden": "true", text: String(i) }),
        textInput(
          level,
          (v) => {
            q.levels[i] = v;
            updateCode();
          },
          { "aria-label": `Level ${i} description`, "data-part": `level-${i}` },
        ),
        removeButton(`Remove level ${i}`, () => {
          q.levels.splice(i, 1);
          renderQuestions(`[data-question="${q.id}"] [data-add-level]`);
        }),
      ),
    );
    return h(
      "div",
      { class: "criteria" },
      h("div", { class: "criteria-title", text: "Levels, lowest first (2 to 10)" }),
      h("ol", { class: "rows" }, rows),
      h(
        "button",
        {
          type: "button",
          class: "link-button",
          "data-add-level": "",
          onclick: () => {
            q.levels.push("");
            renderQuestions(`[data-question="${q.id}"] [data-part="level-${q.levels.length - 1}"]`);
          },
        },
        "Add level",
      ),
    );
  }

  function freeName(type) {
    const taken = new Set(questions.map((q) => q.name));
    for (let i = 1; ; i++) {
      const name = `${type}_${i}`;
      if (!taken.has(name)) return name;
    }
  }

  function addQuestion(type) {
    const base = { type, name: freeName(type), instructions: "" };
    if (type === "noul") Object.assign(base, { yes: "", no: "" });
    if (type === "choice")
      base.options = [
        { label: "", description: "" },
        { label: "", description: "" },
      ];
    if (type === "score") base.levels = ["low", "medium", "high"];
    const q = withId(base);
    questions.push(q);
    renderQuestions(`[data-question="${q.id}"] [data-part="instructions"]`);
  }

  function removeQuestion(id) {
    const index = questions.findIndex((q) => q.id === id);
    questions.splice(index, 1);
    const next = questions[index] ?? questions[index - 1];
    renderQuestions(next === undefined ? '[data-add="noul"]' : `[data-question="${next.id}"] .icon-button`);
  }

  // ---- the request, in either dialect ---------------------------------------------------------------------

  class InputProblem extends Error {
    constructor(message, selector) {
      super(message);
      this.selector = selector;
    }
  }

  /** The state as typed: the text, or the parsed JSON value. */
  function stateValue() {
    const text = $("state").value;
    if (stateFormat() === "text") return text;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new InputProblem(
        `The state is not valid JSON (${err.message}). Fix it, or switch the state to Text.`,
        "#state",
      );
    }
  }

  /** What a JSON object body cannot hold: two questions (or two options) with one name. */
  function checkNames() {
    const seen = new Set();
    for (const q of questions) {
      const selector = `[data-question="${q.id}"] [data-part="name"]`;
      const name = q.name.trim();
      if (name === "") throw new InputProblem("Every question needs a name: its answer is found under it.", selector);
      if (seen.has(name))
        throw new InputProblem(`Two questions are named "${name}": give each its own name.`, selector);
      seen.add(name);
      if (q.type === "choice") {
        const labels = new Set();
        q.options.forEach((option, i) => {
          const label = option.label.trim();
          const at = `[data-question="${q.id}"] [data-part="label-${i}"]`;
          if (labels.has(label)) throw new InputProblem(`Question "${name}" has the option "${label}" twice.`, at);
          labels.add(label);
        });
      }
    }
  }

  const orNull = (text) => (text.trim() === "" ? null : text);

  function systemOneQuestion(q) {
    if (q.type === "noul") {
      const criteria = {};
      if (q.yes.trim() !== "") criteria.true = q.yes;
      if (q.no.trim() !== "") criteria.false = q.no;
      return Object.keys(criteria).length === 0
        ? { type: "noul", instructions: q.instructions }
        : { type: "noul", instructions: q.instructions, criteria };
    }
    if (q.type === "choice") {
      return {
        type: "choice",
        instructions: q.instructions,
        criteria: Object.fromEntries(q.options.map((o) => [o.label.trim(), orNull(o.description)])),
      };
    }
    return { type: "score", instructions: q.instructions, criteria: q.levels.map(orNull) };
  }

  /** `POST /v1/systemone`'s body (packages/contracts/src/decider/schemas.ts). */
  function systemOneBody(model, state) {
    return {
      model,
      state,
      questions: Object.fromEntries(questions.map((q) => [q.name.trim(), systemOneQuestion(q)])),
    };
  }

  /**
   * A yes/no question as a Decisions predicate, which has no criteria: what yes and no mean is added to the
   * instructions (as TanStack's and LiteLLM's mappings of System One do).
   */
  function predicateInstructions(q) {
    const lines = [q.instructions];
    if (q.yes.trim() !== "") lines.push(`True means: ${q.yes}`);
    if (q.no.trim() !== "") lines.push(`False means: ${q.no}`);
    return lines.join("\n");
  }

  function decisionsQuestion(q) {
    const name = q.name.trim();
    if (q.type === "noul") return { type: "predicate", name, instructions: predicateInstructions(q) };
    if (q.type === "choice") {
      return {
        type: "choice",
        name,
        instructions: q.instructions,
        choices: q.options.map((o) =>
          o.description.trim() === ""
            ? { value: o.label.trim() }
            : { value: o.label.trim(), description: o.description },
        ),
      };
    }
    // A level needs a label: an empty one is called by its number.
    return {
      type: "score",
      name,
      instructions: q.instructions,
      levels: q.levels.map((l, i) => ({ label: l.trim() === "" ? String(i) : l })),
    };
  }

  /**
   * The state as Decisions `input`: text as it is; a JSON object (or a list of objects) as an `input_json`
   * part of a user message; any other JSON value as its JSON text.
   */
  function decisionsInput(state) {
    if (typeof state === "string") return state;
    const objects =
      (typeof state === "object" && state !== null && !Array.isArray(state)) ||
      (Array.isArray(state) &&
        state.length > 0 &&
        state.every((v) => typeof v === "object" && v !== null && !Array.isArray(v)));
    if (!objects) return JSON.stringify(state);
    return [{ role: "user", content: [{ type: "input_json", data: state }] }];
  }

  /** `POST /v1/decisions`'s body (OpenAI's Decisions dialect: questions in a list, answered in order). */
  function decisionsBody(model, state) {
    return { model, input: decisionsInput(state), questions: questions.map(decisionsQuestion) };
  }

  function currentModel() {
    return $("model").value || "localdecider";
  }

  /** Both bodies from what is on the page; throws an InputProblem for what no body can hold. */
  function buildBodies() {
    const state = stateValue();
    checkNames();
    const model = currentModel();
    return { systemone: systemOneBody(model, state), decisions: decisionsBody(model, state) };
  }

  // ---- code samples ------------------------------------------------------------------------------------

  const shellQuote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;
  const js = (value) => JSON.stringify(value);
  const jsKey = (key) => (/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key));
  const indent = (text, spaces) => text.replace(/\n/g, `\n${" ".repeat(spaces)}`);

  function curlSample(path, body) {
    const lines = [`curl -sS ${shellQuote(`${baseUrl()}/${path}`)} \\`, `  -H 'Content-Type: application/json' \\`];
    if (keyRequired || apiKey !== "") lines.push(`  -H "Authorization: Bearer $LOCALDECIDER_API_KEY" \\`);
    // A quoted heredoc: the shell changes nothing in the JSON (no quoting to get wrong).
    lines.push(`  --data-binary @- <<'JSON'`, JSON.stringify(body, null, 2), "JSON");
    return lines.join("\n");
  }

  function sdkQuestion(q) {
    const instructions = js(q.instructions);
    if (q.type === "noul") {
      const criteria = systemOneQuestion(q).criteria;
      return criteria === undefined ? `noul(${instructions})` : `noul(${instructions}, ${js(criteria)})`;
    }
    if (q.type === "choice") {
      const entries = q.options.map((o) => `${jsKey(o.label.trim())}: ${js(orNull(o.description))}`);
      return `choice(${instructions}, { ${entries.join(", ")} })`;
    }
    return `score(${instructions}, ${js(q.levels.map(orNull))})`;
  }

  function sdkSample(body) {
    const used = [...new Set(questions.map((q) => q.type))].sort();
    const questionLines = questions.map((q) => `    ${jsKey(q.name.trim())}: ${sdkQuestion(q)},`);
    return [
      `import { ${[...used, "TypeSafeClient"].join(", ")} } from "@typesafe-ai/sdk";`,
      "",
      "// Any key will do when the decider has no LOCALDECIDER_API_KEY (the SDK always sends one).",
      "const client = new TypeSafeClient({",
      `  baseURL: ${js(baseUrl())},`,
      `  apiKey: process.env.LOCALDECIDER_API_KEY ?? "none",`,
      "});",
      "",
      "const result = await client.systemOne({",
      `  model: ${js(body.model)},`,
      `  state: ${indent(JSON.stringify(body.state, null, 2), 2)},`,
      "  questions: {",
      ...questionLines,
      "  },",
      "});",
      "console.log(JSON.stringify(result.answers, null, 2));",
    ].join("\n");
  }

  function openaiSample(body) {
    return [
      'import OpenAI from "openai";',
      "",
      "// client.decisions needs openai 7.59 or newer. Any key will do when the decider has no LOCALDECIDER_API_KEY.",
      "const client = new OpenAI({",
      `  baseURL: ${js(`${baseUrl()}/v1`)},`,
      `  apiKey: process.env.LOCALDECIDER_API_KEY ?? "none",`,
      "});",
      "",
      `const decision = await client.decisions.create(${JSON.stringify(body, null, 2)});`,
      "console.log(JSON.stringify(decision.answers, null, 2));",
    ].join("\n");
  }

  function updateCode() {
    let bodies;
    try {
      bodies = buildBodies();
    } catch (err) {
      if (!(err instanceof InputProblem)) throw err;
      for (const id of ["code-curl", "code-sdk", "code-openai"]) $(id).textContent = `# ${err.message}`;
      return;
    }
    const curl =
      dialect() === "systemone"
        ? curlSample("v1/systemone", bodies.systemone)
        : curlSample("v1/decisions", bodies.decisions);
    $("code-curl").textContent = curl;
    $("code-sdk").textContent = sdkSample(bodies.systemone);
    $("code-openai").textContent = openaiSample(bodies.decisions);
  }

  // ---- sending, and what came back ------------------------------------------------------------------------

  function headers(json) {
    const result = json ? { "Content-Type": "application/json" } : {};
    if (apiKey !== "") result.Authorization = `Bearer ${apiKey}`;
    return result;
  }

  function clearProblems() {
    $("error").hidden = true;
    $("error").replaceChildren();
    for (const el of document.querySelectorAll('[aria-invalid="true"]')) el.removeAttribute("aria-invalid");
  }

  /** Shows a problem in plain words: a title, optional lines, and the field it is about (marked and focused). */
  function showProblem(title, lines = [], selector) {
    const box = $("error");
    box.replaceChildren(h("p", { class: "error-title", text: title }));
    if (lines.length > 0)
      box.append(
        h(
          "ul",
          {},
          lines.map((line) => h("li", { text: line })),
        ),
      );
    box.hidden = false;
    const target = selector === undefined ? null : document.querySelector(selector);
    if (target !== null) {
      target.setAttribute("aria-invalid", "true");
      target.focus();
    }
  }

  async function send() {
    if (sending) return;
    clearProblems();
    let bodies;
    try {
      bodies = buildBodies();
    } catch (err) {
      if (!(err instanceof InputProblem)) throw err;
      showProblem(err.message, [], err.selector);
      return;
    }
    const chosen = dialect();
    const path = chosen === "systemone" ? "v1/systemone" : "v1/decisions";
    const body = chosen === "systemone" ? bodies.systemone : bodies.decisions;
    sending = true;
    $("send").disabled = true;
    $("send").textContent = "Sending…";
    $("result").setAttribute("aria-busy", "true");
    $("status").textContent = `Asking ${currentModel()}…`;
    const started = performance.now();
    try {
      let response;
      let text;
      try {
        response = await fetch(`${baseUrl()}/${path}`, {
          method: "POST",
          headers: headers(true),
          body: JSON.stringify(body),
        });
        text = await response.text();
      } catch (err) {
        $("status").textContent = "No answer.";
        showProblem(`Could not reach the decider at ${baseUrl()}: ${err.message}. Is it still running?`);
        return;
      }
      const ms = performance.now() - started;
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      $("code-json").textContent = parsed === undefined ? text : JSON.stringify(parsed, null, 2);
      const statusLine = `HTTP ${response.status} · ${Math.round(ms)} ms`;
      if (response.ok && parsed !== undefined) {
        $("status").textContent = `${statusLine} · ${usageText(parsed.usage)} · model ${parsed.model}`;
        try {
          renderAnswers(chosen, parsed);
        } catch (err) {
          // Not the dialect's shape: the raw JSON still shows what came.
          $("answers").replaceChildren();
          showProblem(`The answer could not be drawn (${err.message}): see Raw JSON for what came back.`);
        }
        selectTab("tab-answers");
      } else {
        $("status").textContent = `${statusLine} · failed`;
        $("answers").replaceChildren(h("p", { class: "empty", text: "No answers: see the problem above." }));
        await explainFailure(response, parsed);
      }
    } finally {
      sending = false;
      $("send").disabled = false;
      $("send").textContent = "Send";
      $("result").removeAttribute("aria-busy");
    }
  }

  function usageText(usage) {
    if (usage === undefined || usage === null) return "no usage reported";
    const parts = [`${usage.input_tokens} input`, `${usage.output_tokens} output`];
    if (typeof usage.total_tokens === "number") parts.push(`${usage.total_tokens} total`);
    return `${parts.join(", ")} tokens`;
  }

  /** The error of either dialect: the decider's `{error, code, details}`, or OpenAI's `{error: {message, param, code}}`. */
  function readError(body) {
    if (body === undefined || body === null || typeof body !== "object")
      return { message: undefined, code: undefined, fields: [] };
    const error = body.error;
    if (typeof error === "string") {
      const fields = Array.isArray(body.details) ? body.details.map((d) => ({ path: d.path, message: d.message })) : [];
      return { message: error, code: body.code, fields };
    }
    if (typeof error === "object" && error !== null) {
      const fields =
        typeof error.param === "string" && error.param !== "" ? [{ path: error.param, message: error.message }] : [];
      return { message: error.message, code: error.code ?? error.type, fields };
    }
    return { message: undefined, code: undefined, fields: [] };
  }

  /** The editor field a problem's path names (`questions.tone.instructions`, `questions[1].choices`), if any. */
  function fieldFor(path) {
    const match = /^questions(?:\.|\[)([^.\]]+)\]?(?:\.(\w+))?/.exec(path ?? "");
    if (match === null)
      return path === "state" || path === "input" ? "#state" : path === "model" ? "#model" : undefined;
    const [, key, part] = match;
    const q =
      /^\d+$/.test(key) && dialect() === "decisions"
        ? questions[Number(key)]
        : questions.find((x) => x.name.trim() === key);
    if (q === undefined) return undefined;
    const card = `[data-question="${q.id}"]`;
    return part === "instructions" || part === "name" ? `${card} [data-part="${part}"]` : `${card} [data-part="name"]`;
  }

  function describePath(path) {
    const match = /^questions(?:\.|\[)([^.\]]+)\]?\.?(.*)$/.exec(path ?? "");
    if (match === null) return path;
    const [, key, rest] = match;
    const q = /^\d+$/.test(key) && dialect() === "decisions" ? questions[Number(key)] : undefined;
    const name = q === undefined ? key : q.name.trim();
    return `question "${name}"${rest === "" ? "" : `, ${rest.replace(/\./g, " › ")}`}`;
  }

  async function explainFailure(response, body) {
    const { message, code, fields } = readError(body);
    const said = message === undefined ? `HTTP ${response.status}` : message;
    const tag = code === undefined ? `HTTP ${response.status}` : `${response.status} ${code}`;
    if (response.status === 401) {
      keyRequired = true;
      updateCode();
      const title =
        apiKey === ""
          ? "This decider needs an API key. Enter it in the API key field and send again."
          : "The API key was not accepted. Check it and send again.";
      showProblem(title, [`The decider said: ${said} (${tag}).`], "#api-key");
      return;
    }
    if (response.status === 400 || response.status === 422) {
      const lines = fields.map((f) => `${describePath(f.path)}: ${f.message}`);
      const title =
        fields.length === 0
          ? `The decider refused the request: ${said} (${tag}).`
          : `The decider refused the request (${tag}). Fix ${fields.length === 1 ? "this field" : "these fields"} and send again:`;
      showProblem(
        title,
        lines,
        fields.map((f) => fieldFor(f.path)).find((s) => s !== undefined),
      );
      return;
    }
    if (response.status === 429) {
      const after = response.headers.get("Retry-After");
      const when = after === null ? "in a moment" : `in ${after} ${after === "1" ? "second" : "seconds"}`;
      showProblem(`The decider is busy: its queue is full. Try again ${when}.`, [
        `The decider said: ${said} (${tag}).`,
      ]);
      return;
    }
    if (response.status === 503) {
      const ready = await readiness();
      const after = response.headers.get("Retry-After");
      const lines = [`The decider said: ${said} (${tag}).`];
      if (after !== null) lines.push(`Try again in ${after} ${after === "1" ? "second" : "seconds"}.`);
      showProblem(
        ready === undefined
          ? "The model is not ready yet, and /ready could not be read."
          : ready.ready
            ? "The model was not ready, but /ready says it is now: send again."
            : `The model is not ready. /ready says: ${ready.reason}`,
        lines,
      );
      return;
    }
    if (response.status === 404 && dialect() === "decisions") {
      showProblem(`This decider does not serve POST /v1/decisions (${tag}). Switch the dialect to System One.`);
      return;
    }
    showProblem(`The request failed: ${said} (${tag}).`);
  }

  /** What GET /ready says: ready, or the reason it is not. */
  async function readiness() {
    try {
      const response = await fetch(`${baseUrl()}/ready`, { headers: headers(false) });
      const body = await response.json();
      if (response.ok) return { ready: true };
      return { ready: false, reason: readError(body).message ?? `HTTP ${response.status}` };
    } catch {
      return undefined;
    }
  }

  // ---- the answers as bars --------------------------------------------------------------------------------

  const percent = (p) => `${(p * 100).toFixed(1)} %`;
  const fixed = (x) => (Math.round(x * 1000) / 1000).toString();

  /** One answer card: a title, a one-line summary, and a bar per outcome (width = its probability). */
  function answerCard(name, type, summary, outcomes, mark) {
    const rows = outcomes.map((o) =>
      h(
        "li",
        { class: o.marked ? "outcome marked" : "outcome", "data-outcome": o.key },
        h(
          "span",
          { class: "outcome-label" },
          h("span", { class: "outcome-text", text: o.label }),
          o.marked ? h("span", { class: "mark", text: mark }) : null,
        ),
        h("span", { class: "track", "aria-hidden": "true" }, barFill(o.p)),
        h("span", { class: "outcome-value", text: percent(o.p) }),
      ),
    );
    return h(
      "article",
      { class: "answer", "data-answer": name, "aria-label": `Answer to ${name}` },
      h(
        "div",
        { class: "answer-head" },
        h("h3", { text: name }),
        h("span", { class: `badge badge-${type}`, text: TYPE_TITLES[type] }),
      ),
      h("p", { class: "answer-summary", text: summary }),
      outcomes.length === 0 ? null : h("ul", { class: "outcomes", "aria-label": `Outcomes of ${name}` }, rows),
    );
  }

  function barFill(p) {
    const fill = h("span", { class: "fill", "data-probability": String(p) });
    // Through the CSSOM: the policy allows no style attribute.
    fill.style.width = `${Math.max(0, Math.min(1, p)) * 100}%`;
    return fill;
  }

  function noulCard(name, p) {
    const outcomes = [
      { key: "true", label: "yes (true)", p, marked: p >= 0.5 },
      { key: "false", label: "no (false)", p: 1 - p, marked: p < 0.5 },
    ];
    return answerCard(name, "noul", `P(yes) = ${fixed(p)}`, outcomes, "likelier");
  }

  function choiceCard(name, choice, confidence, entries) {
    const outcomes = entries.map(([label, p]) => ({ key: label, label, p, marked: label === choice }));
    return answerCard(name, "choice", `Chose "${choice}" · confidence ${fixed(confidence)}`, outcomes, "chosen");
  }

  /** levels: [{key, label, p}] lowest first; the score is the expected level, so the nearest level is marked. */
  function scoreCard(name, score, confidence, levels) {
    const nearest = Math.round(score);
    const outcomes = levels.map((l, i) => ({ ...l, marked: i === nearest }));
    const top = Math.max(0, levels.length - 1);
    return answerCard(
      name,
      "score",
      `Score ${fixed(score)} on 0 to ${top} · confidence ${fixed(confidence)}`,
      outcomes,
      "≈ score",
    );
  }

  const describe = (entry) =>
    entry === null || entry === undefined ? "" : typeof entry === "string" ? entry : JSON.stringify(entry);

  function renderAnswers(chosenDialect, body) {
    const cards = [];
    if (chosenDialect === "systemone") {
      for (const [name, a] of Object.entries(body.answers ?? {})) {
        if (a.type === "noul") cards.push(noulCard(name, a.noul));
        else if (a.type === "choice")
          cards.push(choiceCard(name, a.choice, a.confidence, Object.entries(a.probabilities)));
        else if (a.type === "score") {
          const levels = Object.entries(a.probabilities).map(([key, p]) => {
            const legend = describe(a.legend?.[key]);
            return { key, label: legend === "" ? key : `${key} · ${legend}`, p };
          });
          cards.push(scoreCard(name, a.score, a.confidence, levels));
        } else cards.push(answerCard(name, "noul", `An answer of type ${a.type}.`, [], ""));
      }
    } else {
      (body.answers ?? []).forEach((a, i) => {
        const name = a.name ?? questions[i]?.name ?? `question ${i + 1}`;
        if (a.type === "predicate") cards.push(noulCard(name, a.probability));
        else if (a.type === "choice") {
          const entries = a.probabilities.map((p) => [String(p.value), p.probability]);
          cards.push(choiceCard(name, String(a.choice), a.confidence, entries));
        } else if (a.type === "score") {
          const levels = a.probabilities.map((p) => ({
            key: String(p.value),
            label: `${p.value} · ${p.label}`,
            p: p.probability,
          }));
          cards.push(scoreCard(name, a.score, a.confidence, levels));
        } else if (a.type === "refusal") {
          cards.push(
            answerCard(name, questions[i]?.type ?? "noul", "The model declined to answer this question.", [], ""),
          );
        }
      });
    }
    $("answers").replaceChildren(...cards);
  }

  // ---- models, tabs, copying ------------------------------------------------------------------------------

  async function loadModels() {
    const hint = $("model-hint");
    try {
      const response = await fetch(`${baseUrl()}/v1/models`, { headers: headers(false) });
      if (response.status === 401) {
        keyRequired = true;
        updateCode();
        hint.textContent = "This decider needs an API key: enter it to list its models.";
        return;
      }
      const body = await response.json();
      if (!response.ok) {
        hint.textContent = `GET /v1/models failed: ${readError(body).message ?? `HTTP ${response.status}`}.`;
        return;
      }
      const select = $("model");
      const current = select.value;
      const names = body.models.map((m) => m.name);
      if (names.length > 0) select.replaceChildren(...names.map((name) => h("option", { value: name, text: name })));
      if (names.length > 0) select.value = names.includes(current) ? current : names[0];
      const backend = body.backend;
      const what =
        backend?.kind === "embedded"
          ? "the embedded engine"
          : backend?.model
            ? `${backend.model} on a model server`
            : undefined;
      hint.textContent = what === undefined ? "From GET /v1/models." : `From GET /v1/models; answered by ${what}.`;
      updateCode();
    } catch (err) {
      hint.textContent = `GET /v1/models failed: ${err.message}.`;
    }
  }

  function selectTab(id) {
    for (const tab of document.querySelectorAll('[role="tab"]')) {
      const selected = tab.id === id;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      $(tab.getAttribute("aria-controls")).hidden = !selected;
    }
  }

  function onTabKey(event) {
    const tabs = [...document.querySelectorAll('[role="tab"]')];
    const index = tabs.indexOf(event.target);
    const to = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    const tab = tabs[(to + tabs.length) % tabs.length];
    selectTab(tab.id);
    tab.focus();
  }

  async function copy(button) {
    const text = $(button.dataset.copy).textContent;
    let done = false;
    try {
      await navigator.clipboard.writeText(text);
      done = true;
    } catch {
      // Not a secure context (plain http to a name other than localhost): the old way.
      const area = h("textarea", { class: "visually-hidden", "aria-hidden": "true", value: text });
      document.body.append(area);
      area.select();
      done = document.execCommand("copy");
      area.remove();
      button.focus();
    }
    const said = done ? "Copied" : "Copy failed: select the text and copy it by hand";
    button.textContent = done ? "Copied" : "Copy failed";
    $("copy-status").textContent = said;
    setTimeout(() => {
      button.textContent = "Copy";
    }, 1500);
  }

  // ---- wiring ---------------------------------------------------------------------------------------------

  function start() {
    $("state").value = EXAMPLE_STATE;
    renderQuestions();
    $("request").addEventListener("submit", (event) => {
      event.preventDefault();
      void send();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        void send();
      }
    });
    for (const button of document.querySelectorAll("[data-add]")) {
      button.addEventListener("click", () => addQuestion(button.dataset.add));
    }
    for (const input of document.querySelectorAll('input[name="dialect"], input[name="state-format"], #model')) {
      input.addEventListener("change", updateCode);
    }
    $("state").addEventListener("input", updateCode);
    $("api-key").addEventListener("input", (event) => {
      apiKey = event.target.value.trim();
      updateCode();
    });
    // Once a key is entered, the models it unlocks.
    $("api-key").addEventListener("change", () => void loadModels());
    for (const tab of document.querySelectorAll('[role="tab"]')) {
      tab.addEventListener("click", () => selectTab(tab.id));
      tab.addEventListener("keydown", onTabKey);
    }
    for (const button of document.querySelectorAll("[data-copy]"))
      button.addEventListener("click", () => void copy(button));
    void loadModels();
  }

  start();
})();
