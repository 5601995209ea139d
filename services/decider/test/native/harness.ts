import { FakeSystemOne, type SystemOneFlavour } from "../fake-systemone/server";
import { type DeciderUnderTest, deciderInFrontOf, type HarnessOptions } from "../helpers";

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
  return deciderInFrontOf(fake, options);
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
