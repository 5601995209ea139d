import { Resvg } from "@resvg/resvg-js";
import type { Bin } from "./metrics";

/**
 * Reliability diagrams and confidence histograms, drawn as SVG by hand (a dozen shapes need no plotting
 * library) and rasterised to PNG by resvg (Rust, shipped prebuilt in its npm package). Text uses the
 * system's fonts; DejaVu Sans or Liberation Sans when present.
 */

export const PANEL_WIDTH = 800;
export const PANEL_HEIGHT = 600;
const FONT = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";
const M = { left: 80, right: 30, top: 84, bottom: 120 };
const PLOT_W = PANEL_WIDTH - M.left - M.right;
const PLOT_H = PANEL_HEIGHT - M.top - M.bottom;

const BLUE = "#3b75af";
const RED = "#c0392b";
const GREY = "#666666";

export interface ReliabilityPanel {
  title: string;
  bins: readonly Bin[];
  count: number;
  ece: number | null;
  mce: number | null;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const fmt = (v: number | null, digits = 3) => (v === null ? "-" : v.toFixed(digits));
const text = (x: number, y: number, body: string, attrs = "") =>
  `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(body)}</text>`;

function svgDocument(panels: string[]): string {
  const width = PANEL_WIDTH * panels.length;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${PANEL_HEIGHT}" viewBox="0 0 ${width} ${PANEL_HEIGHT}" font-family="${FONT}" font-size="14" xml:space="preserve">`,
    `<rect width="${width}" height="${PANEL_HEIGHT}" fill="#ffffff"/>`,
    ...panels.map((p, i) => `<g transform="translate(${i * PANEL_WIDTH},0)">${p}</g>`),
    "</svg>",
  ].join("\n");
}

/** Frame, grid, ticks and axis titles of a plot whose x runs 0..1 and y 0..yMax. */
function axes(xTitle: string, yTitle: string, yMax: number, yTicks: number[], yFormat: (v: number) => string): string {
  const x = (v: number) => M.left + v * PLOT_W;
  const y = (v: number) => M.top + PLOT_H - (v / yMax) * PLOT_H;
  const out: string[] = [];
  for (let i = 0; i <= 10; i++) {
    const v = i / 10;
    out.push(`<line x1="${x(v)}" y1="${M.top}" x2="${x(v)}" y2="${M.top + PLOT_H}" stroke="#e6e6e6"/>`);
    out.push(text(x(v), M.top + PLOT_H + 20, v.toFixed(1), 'text-anchor="middle" fill="#333"'));
  }
  for (const v of yTicks) {
    out.push(`<line x1="${M.left}" y1="${y(v)}" x2="${M.left + PLOT_W}" y2="${y(v)}" stroke="#e6e6e6"/>`);
    out.push(text(M.left - 8, y(v) + 5, yFormat(v), 'text-anchor="end" fill="#333"'));
  }
  out.push(`<rect x="${M.left}" y="${M.top}" width="${PLOT_W}" height="${PLOT_H}" fill="none" stroke="#333"/>`);
  out.push(text(M.left + PLOT_W / 2, M.top + PLOT_H + 44, xTitle, 'text-anchor="middle" font-size="15"'));
  out.push(
    text(
      0,
      0,
      yTitle,
      `text-anchor="middle" font-size="15" transform="translate(24,${M.top + PLOT_H / 2}) rotate(-90)"`,
    ),
  );
  return out.join("\n");
}

function heading(title: string, subtitle: string): string {
  return [
    text(M.left, 32, title, 'font-size="20" font-weight="bold"'),
    text(M.left, 58, subtitle, `font-size="15" fill="${GREY}"`),
  ].join("\n");
}

/** The row of bin counts under the x axis, so sparse bins are visible at a glance. */
function countRow(bins: readonly Bin[]): string {
  const y = M.top + PLOT_H + 76;
  return [
    text(M.left - 8, y, "count", `text-anchor="end" fill="${GREY}"`),
    ...bins.map((b) =>
      text(
        M.left + ((b.lower + b.upper) / 2) * PLOT_W,
        y,
        String(b.count),
        `text-anchor="middle" fill="${b.count === 0 ? "#bbbbbb" : "#222"}"`,
      ),
    ),
  ].join("\n");
}

function legend(items: [string, string][]): string {
  // Inside the plot's upper left, where an over-confident model's bars are lowest, on a white box so that
  // bars and marker lines behind it do not cross the text (width estimated from the text: about 8 px a letter).
  const width = 54 + 8 * Math.max(...items.map(([, label]) => label.length));
  const box = `<rect x="${M.left + 6}" y="${M.top + 8}" width="${width}" height="${items.length * 22 + 6}" fill="#ffffff" fill-opacity="0.9" stroke="#cccccc"/>`;
  return (
    box +
    items
      .map(([swatch, label], i) => {
        const y = M.top + 22 + i * 22;
        return `${swatch.replace(/\{x\}/g, String(M.left + 14)).replace(/\{y\}/g, String(y))}${text(M.left + 44, y + 5, label)}`;
      })
      .join("\n")
  );
}

function reliabilityPanel(panel: ReliabilityPanel): string {
  const x = (v: number) => M.left + v * PLOT_W;
  const y = (v: number) => M.top + PLOT_H - v * PLOT_H;
  const out = [
    heading(
      panel.title,
      `n = ${panel.count}  ·  ECE ${fmt(panel.ece)}  ·  MCE ${fmt(panel.mce)}  ·  10 equal-width bins`,
    ),
    axes(
      "Confidence: probability of the predicted outcome",
      "Observed accuracy in bin",
      1,
      [0, 0.2, 0.4, 0.6, 0.8, 1],
      (v) => v.toFixed(1),
    ),
    `<line x1="${x(0)}" y1="${y(0)}" x2="${x(1)}" y2="${y(1)}" stroke="${GREY}" stroke-width="1.5" stroke-dasharray="6 5"/>`,
  ];
  for (const b of panel.bins) {
    if (b.count === 0 || b.accuracy === null || b.confidence === null) continue;
    const left = x(b.lower) + 3;
    const width = x(b.upper) - x(b.lower) - 6;
    out.push(
      `<rect x="${left}" y="${y(b.accuracy)}" width="${width}" height="${Math.max(0, y(0) - y(b.accuracy))}" fill="${BLUE}" fill-opacity="0.8"/>`,
    );
    // The gap: from the bin's accuracy to its mean confidence, and the confidence as a red tick.
    const mid = (left + left + width) / 2;
    out.push(
      `<line x1="${mid}" y1="${y(b.accuracy)}" x2="${mid}" y2="${y(b.confidence)}" stroke="${RED}" stroke-width="2"/>`,
    );
    out.push(
      `<line x1="${left}" y1="${y(b.confidence)}" x2="${left + width}" y2="${y(b.confidence)}" stroke="${RED}" stroke-width="3"/>`,
    );
  }
  out.push(
    legend([
      [
        `<rect x="{x}" y="{y}" width="22" height="12" transform="translate(0,-6)" fill="${BLUE}" fill-opacity="0.8"/>`,
        "observed accuracy",
      ],
      [
        `<line x1="{x}" y1="{y}" x2="${M.left + 36}" y2="{y}" stroke="${RED}" stroke-width="3"/>`,
        "mean confidence (gap in red)",
      ],
      [
        `<line x1="{x}" y1="{y}" x2="${M.left + 36}" y2="{y}" stroke="${GREY}" stroke-width="1.5" stroke-dasharray="6 5"/>`,
        "perfectly calibrated",
      ],
    ]),
  );
  out.push(countRow(panel.bins));
  return out.join("\n");
}

/** A reliability diagram; two panels side by side (e.g. held-out before and after a fit) when given two. */
export function reliabilitySvg(panels: readonly ReliabilityPanel[]): string {
  return svgDocument(panels.map(reliabilityPanel));
}

/** How many answers fall in each confidence bin, with the mean confidence and the accuracy marked. */
export function confidenceHistogramSvg(panel: ReliabilityPanel & { accuracy: number | null }): string {
  const most = Math.max(1, ...panel.bins.map((b) => b.count));
  const step = niceStep(most / 5);
  // Headroom above the tallest bar for its count label.
  const yMax = Math.ceil((most * 1.08) / step) * step;
  const ticks = Array.from({ length: Math.round(yMax / step) + 1 }, (_, i) => i * step);
  const x = (v: number) => M.left + v * PLOT_W;
  const y = (v: number) => M.top + PLOT_H - (v / yMax) * PLOT_H;
  const meanConfidence =
    panel.count === 0 ? null : panel.bins.reduce((s, b) => s + (b.confidence ?? 0) * b.count, 0) / panel.count;
  const out = [
    heading(
      panel.title,
      `n = ${panel.count}  ·  mean confidence ${fmt(meanConfidence)}  ·  accuracy ${fmt(panel.accuracy)}`,
    ),
    axes("Confidence: probability of the predicted outcome", "Answers", yMax, ticks, (v) => String(v)),
  ];
  for (const b of panel.bins) {
    if (b.count === 0) continue;
    const left = x(b.lower) + 3;
    const width = x(b.upper) - x(b.lower) - 6;
    out.push(
      `<rect x="${left}" y="${y(b.count)}" width="${width}" height="${y(0) - y(b.count)}" fill="${BLUE}" fill-opacity="0.8"/>`,
    );
    out.push(text(left + width / 2, y(b.count) - 6, String(b.count), 'text-anchor="middle" font-size="13"'));
  }
  const marker = (v: number | null, color: string, dash: string) =>
    v === null
      ? ""
      : `<line x1="${x(v)}" y1="${M.top}" x2="${x(v)}" y2="${M.top + PLOT_H}" stroke="${color}" stroke-width="2.5" stroke-dasharray="${dash}"/>`;
  out.push(marker(meanConfidence, RED, "8 4"), marker(panel.accuracy, "#2e8b57", "3 3"));
  out.push(
    legend([
      [
        `<line x1="{x}" y1="{y}" x2="${M.left + 36}" y2="{y}" stroke="${RED}" stroke-width="2.5" stroke-dasharray="8 4"/>`,
        "mean confidence",
      ],
      [
        `<line x1="{x}" y1="{y}" x2="${M.left + 36}" y2="{y}" stroke="#2e8b57" stroke-width="2.5" stroke-dasharray="3 3"/>`,
        "accuracy",
      ],
    ]),
  );
  out.push(countRow(panel.bins));
  return svgDocument([out.join("\n")]);
}

/** 1, 2 or 5 times a power of ten, at least `raw` (and at least 1: counts are whole). */
function niceStep(raw: number): number {
  if (raw <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/** The SVG as a PNG of the SVG's own size, on a white background. */
export function toPng(svg: string): Buffer {
  return new Resvg(svg, {
    background: "#ffffff",
    font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans" },
  })
    .render()
    .asPng();
}
