import type { TinyModelOptions } from "./tiny-model";

/**
 * The tiny model the decider's engine tests answer with. Its designed output bias makes the top 20 of
 * every position hold exactly: the four boolean tokens, the ten digits, three junk tokens that name no
 * outcome, and the letters A-C. Every other token that could begin an outcome sits at least ~8 nats below
 * them, so for yes/no, score and choices of up to 3 labels the reported alternatives hold all of the
 * outcomes' probability (to ~1e-9), while letters D-T always fall outside the top 20 (absent outcomes).
 */
export const ANSWER_MODEL: TinyModelOptions = {
  seed: 7,
  bias: {
    " true": 26.0,
    " false": 25.4,
    true: 25.1,
    false: 24.7,
    "0": 22.6,
    "1": 23.4,
    "2": 22.1,
    "3": 23.0,
    "4": 22.3,
    "5": 22.9,
    "6": 23.2,
    "7": 22.0,
    "8": 22.8,
    "9": 22.5,
    ' "': 21.4,
    " ": 21.0,
    "\n": 21.2,
    A: 20.3,
    B: 20.9,
    C: 20.6,
    ...Object.fromEntries("DEFGHIJKLMNOPQRST".split("").map((letter, i) => [letter, 12 + (i % 5) * 0.3])),
  },
};
