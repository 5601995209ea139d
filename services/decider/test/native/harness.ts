import { FakeSystemOne, type SystemOneFlavour } from "../fake-systemone/server";
import { type DeciderUnderTest, deciderFor, type HarnessOptions } from "../helpers";

/** The real app in front of a fake native System One server on a real port. */
export interface NativeHarness extends DeciderUnderTest {
  fake: FakeSystemOne;
  upstream: string;
}

export async function nativeHarness(
  options: HarnessOptions & {
    flavour?: SystemOneFlavour;
    models?: string[];
    setup?: (fake: FakeSystemOne) => void;
  } = {},
): Promise<NativeHarness> {
  const fake = new FakeSystemOne({
    flavour: options.flavour ?? "llama",
    models: options.models ?? [options.upstreamModel ?? "test-model"],
  });
  options.setup?.(fake);
  const upstream = await fake.start();
  const d = deciderFor(upstream, options);
  // The shared limits admit nothing before their first heartbeat reached Redis.
  for (let i = 0; options.sharedRedis === true && (await d.limiter.unavailable()) !== undefined; i++) {
    if (i === 200) throw new Error("the machine's Redis (127.0.0.1:6379) does not answer");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return {
    ...d,
    fake,
    upstream,
    close: async () => {
      await fake.stop();
      await d.close();
    },
  };
}

/** A body of `n` questions cycling noul, a choice of 3 and a score of 4, named q0..q(n-1). */
export function mixedQuestions(n: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      const name = `q${i}`;
      if (i % 3 === 0) return [name, { type: "noul", instructions: `Is statement ${i} true?` }];
      if (i % 3 === 1) {
        return [
          name,
          { type: "choice", instructions: `Which one for ${i}?`, criteria: { a: null, b: "bee", c: null } },
        ];
      }
      return [name, { type: "score", instructions: `How much for ${i}?`, criteria: ["none", "some", "much", "all"] }];
    }),
  );
}

/** A choice of `n` labels l0..l(n-1), each described. */
export function wideChoice(n: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${i}`, `option number ${i}`]));
}

/** The questions of each call the fake received, by key, in order. */
export function questionsOfCalls(fake: FakeSystemOne): Record<string, { criteria?: unknown }>[] {
  return fake.requests.map((r) => r.questions as Record<string, { criteria?: unknown }>);
}
