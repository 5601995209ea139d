import { PNG } from "pngjs";
import { confidenceHistogramSvg, PANEL_HEIGHT, PANEL_WIDTH, reliabilitySvg, toPng } from "../src/charts";
import { type Prediction, reliabilityBins } from "../src/metrics";

const preds: Prediction[] = Array.from({ length: 50 }, (_, i) => ({
  probabilities: [0.5 + (i % 10) / 20, 0.5 - (i % 10) / 20],
  label: i % 3 === 0 ? 1 : 0,
}));
const panel = { title: "Reliability: test", bins: reliabilityBins(preds), count: 50, ece: 0.1, mce: 0.2 };

/** Decodes the PNG and counts its pixels by colour class. */
function inspect(png: Buffer) {
  const image = PNG.sync.read(png);
  let ink = 0;
  let blue = 0;
  let red = 0;
  for (let i = 0; i < image.data.length; i += 4) {
    const [r, g, b] = [image.data[i] as number, image.data[i + 1] as number, image.data[i + 2] as number];
    if (r < 200 || g < 200 || b < 200) ink += 1;
    if (b > 150 && r < 120) blue += 1;
    if (r > 150 && g < 90 && b < 90) red += 1;
  }
  return { width: image.width, height: image.height, pixels: image.width * image.height, ink, blue, red };
}

describe("charts", () => {
  it("draw a reliability diagram as a decodable PNG of the panel's size, with bars, gaps and text", () => {
    const png = inspect(toPng(reliabilitySvg([panel])));
    expect([png.width, png.height]).toStrictEqual([PANEL_WIDTH, PANEL_HEIGHT]);
    expect(png.blue / png.pixels).toBeGreaterThan(0.03);
    expect(png.red).toBeGreaterThan(100);
    expect(png.ink / png.pixels).toBeLessThan(0.5);
  });

  it("put two panels side by side", () => {
    const png = inspect(toPng(reliabilitySvg([panel, { ...panel, title: "after" }])));
    expect([png.width, png.height]).toStrictEqual([2 * PANEL_WIDTH, PANEL_HEIGHT]);
  });

  it("draw a confidence histogram", () => {
    const png = inspect(toPng(confidenceHistogramSvg({ ...panel, accuracy: 0.66 })));
    expect([png.width, png.height]).toStrictEqual([PANEL_WIDTH, PANEL_HEIGHT]);
    expect(png.blue / png.pixels).toBeGreaterThan(0.03);
  });

  it("draw axes and labels for no answers at all (every bin empty), without bars", () => {
    const empty = { ...panel, bins: reliabilityBins([]), count: 0, ece: null, mce: null };
    const png = inspect(toPng(reliabilitySvg([empty])));
    expect(png.ink).toBeGreaterThan(1000);
    // Only the legend swatch (22 x 12 px) is blue.
    expect(png.blue).toBeLessThan(400);
    expect(reliabilitySvg([empty])).toContain("ECE -");
  });

  it("escape titles in the SVG", () => {
    expect(reliabilitySvg([{ ...panel, title: "a <b> & c" }])).toContain("a &lt;b&gt; &amp; c");
  });
});
