import type { ImageAsset } from "@localdecider/contracts/decider";

/** A 1×1 PNG file, as Jev 1.14's `assets` map carries one. */
export const PNG_ASSET: ImageAsset = {
  type: "image",
  format: "png",
  data_base64: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
};

/** The start of a JPEG file (start-of-image and JFIF markers): the decider reads no further than its signature. */
export const JPEG_ASSET: ImageAsset = {
  type: "image",
  format: "jpg",
  data_base64: Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]).toString("base64"),
};
