import { partsOf } from "../src/decide/plan";
import { probeOf } from "../src/decide/probe";
import { PROMPT_VERSION, renderPrompt } from "../src/prompt";

describe("the prompt", () => {
  it("is version 2 (one probe per question, prefilled up to its value)", () => {
    expect(PROMPT_VERSION).toBe("2");
  });

  it("renders the system message, the state once, then each question with its codes (pinned)", () => {
    const parts = [
      ...partsOf("billing", {
        type: "noul",
        instructions: "Is this about billing?",
        criteria: { true: "money", false: null },
      }),
      ...partsOf("tone", {
        type: "choice",
        instructions: { ask: "tone?" },
        criteria: { calm: null, angry: ["shouting"] },
      }),
      ...partsOf("urgency", { type: "score", criteria: ["not", "very"] }),
    ];
    const messages = renderPrompt({ text: "I was charged twice.\nTwice!" }, parts);
    expect(messages.map((m) => m.role)).toStrictEqual(["system", "user"]);
    expect(messages[0]?.content).toContain("Each reply answers one question: it is one JSON object");
    expect(messages[1]?.content).toBe(
      [
        "# STATE",
        "## text",
        "I was charged twice.",
        "Twice!",
        "",
        "# QUESTIONS",
        "",
        '## Question q1: "billing" (yes/no)',
        "Instructions: Is this about billing?",
        "Outcomes:",
        "- true — money",
        "- false",
        "",
        '## Question q2: "tone" (choice)',
        'Instructions: {"ask":"tone?"}',
        "Options (answer with the code):",
        '- "A": "calm"',
        '- "B": "angry" — ["shouting"]',
        "",
        '## Question q3: "urgency" (score 0-1)',
        "Rubric levels:",
        "- 0 — not",
        "- 1 — very",
        "",
        "Reply to one question at a time: the key your reply starts with (q1, q2, q3) names it.",
      ].join("\n"),
    );
    // Each probe is the same prefix plus an assistant message that ends where its value begins.
    const probes = parts.map((part, i) => probeOf(messages, part, i));
    for (const probe of probes) expect(probe.messages.slice(0, 2)).toStrictEqual(messages);
    expect(probes.map((p) => p.messages[2])).toStrictEqual([
      { role: "assistant", content: '{"q1":' },
      { role: "assistant", content: '{"q2": "' },
      { role: "assistant", content: '{"q3": ' },
    ]);
  });

  it("renders a state that is not an object of strings as indented JSON", () => {
    const parts = partsOf("a", { type: "noul" });
    expect(renderPrompt({ n: 1, s: "x" }, parts)[1]?.content).toContain(
      '# STATE\n{\n  "n": 1,\n  "s": "x"\n}\n\n# QUESTIONS',
    );
    expect(renderPrompt(null, parts)[1]?.content).toContain("# STATE\nnull\n\n# QUESTIONS");
    expect(renderPrompt([1, 2], parts)[1]?.content).toContain("# STATE\n[\n  1,\n  2\n]\n\n# QUESTIONS");
  });

  it("sends a string state as is and names chunk and final rounds of split choices", () => {
    const parts = partsOf("big", {
      type: "choice",
      criteria: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`l${i}`, null])),
    });
    const user = renderPrompt("plain text", parts)[1]?.content ?? "";
    expect(user.startsWith("# STATE\nplain text\n\n# QUESTIONS")).toBe(true);
    expect(user).toContain('## Question q1: "big" (choice, options 1 of 2 groups)');
    expect(user).toContain('## Question q2: "big" (choice, options 2 of 2 groups)');
  });
});
