/**
 * GPT-2 style byte-level BPE (Qwen2's tokenizer): every byte is written as one printable character, so
 * a space is "Ġ" and a newline "Ċ" in the vocabulary. Printable Latin-1 bytes stand for themselves; the
 * other 68 bytes, in increasing order, map to U+0100, U+0101, ...
 */
const BYTE_TO_CHAR: string[] = [];
const CHAR_TO_BYTE = new Map<string, number>();
{
  let next = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const char = String.fromCharCode(printable ? b : 256 + next++);
    BYTE_TO_CHAR.push(char);
    CHAR_TO_BYTE.set(char, b);
  }
}

/** The vocabulary spelling of a text: its UTF-8 bytes, one character each. */
export function toByteLevel(text: string): string {
  let out = "";
  for (const b of Buffer.from(text, "utf8")) out += BYTE_TO_CHAR[b];
  return out;
}

/** The bytes a vocabulary entry stands for (what llama.cpp's token_to_piece returns for a normal token). */
export function fromByteLevel(tokenText: string): number[] {
  const bytes: number[] = [];
  for (const char of tokenText) {
    const b = CHAR_TO_BYTE.get(char);
    // Not byte-level (never so in Qwen2's vocabulary): keep the character's own UTF-8, as llama.cpp does.
    if (b === undefined) bytes.push(...Buffer.from(char, "utf8"));
    else bytes.push(b);
  }
  return bytes;
}
