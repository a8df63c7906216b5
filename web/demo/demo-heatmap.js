// Canvas heatmaps for the demo page: one pixel per element, scaled up by CSS (pixelated),
// a colour bar underneath and a read-out of the element under the pointer.

// Colour maps as stops (t, [r, g, b]), interpolated linearly.
const MAPS = {
  // Sequential, perceptually even (viridis, sampled): weights.
  viridis: [
    [0, [68, 1, 84]],
    [0.25, [59, 82, 139]],
    [0.5, [33, 145, 140]],
    [0.75, [94, 201, 98]],
    [1, [253, 231, 37]],
  ],
  // Diverging blue-white-red: signed values (gradients), 0 is white.
  diverging: [
    [0, [33, 102, 172]],
    [0.25, [103, 169, 207]],
    [0.5, [247, 247, 247]],
    [0.75, [239, 138, 98]],
    [1, [178, 24, 43]],
  ],
  // Errors: dark (tiny) to amber (near the bound); over the bound gets OVER.
  error: [
    [0, [22, 27, 46]],
    [0.35, [63, 58, 125]],
    [0.7, [190, 92, 120]],
    [1, [252, 196, 92]],
  ],
};
export const MASKED_RGB = [208, 211, 218]; // absent keys: light grey
export const DROPPED_RGB = [255, 255, 255]; // weights zeroed by dropout
export const OVER_RGB = [255, 0, 64]; // error over the pass/fail bound

function colour(map, t) {
  const stops = MAPS[map];
  t = Math.min(1, Math.max(0, t));
  for (let i = 1; i < stops.length; i++) {
    const [t1, c1] = stops[i];
    if (t <= t1) {
      const [t0, c0] = stops[i - 1];
      const f = (t - t0) / (t1 - t0);
      return c0.map((c, j) => Math.round(c + f * (c1[j] - c)));
    }
  }
  return stops[stops.length - 1][1];
}

export const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;

export function gradientCss(map) {
  return `linear-gradient(to right, ${MAPS[map].map(([t, c]) => `${css(c)} ${t * 100}%`).join(", ")})`;
}

const fmt = (v) =>
  Number.isNaN(v)
    ? "—"
    : v === 0 || (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e4)
      ? v.toPrecision(4)
      : v.toExponential(2);
const short = (v) =>
  v === 0 || (Math.abs(v) >= 1e-2 && Math.abs(v) < 1e3) ? v.toPrecision(3) : v.toExponential(1);

// opts: {kind: "weights" | "signed" | "error", bound (error: the worst element's), bounds
//        (error, optional: each element's own, as data), dropped (Uint8Array), rowLabel,
//        colLabel, title}. With bounds an error map shows each error over its own bound.
// Returns the figure element: title, canvas, colour bar and hover read-out.
export function heatmap(data, rows, cols, opts) {
  const fig = document.createElement("figure");
  fig.className = `heatmap heatmap-${opts.kind}`;
  const cap = document.createElement("figcaption");
  cap.innerHTML = `<span class="hm-title">${opts.title}</span> <span class="hm-dims">${rows} × ${cols}</span>`;
  const canvas = document.createElement("canvas");
  canvas.width = cols;
  canvas.height = rows;
  const { toT, lo, hi, map, scaleNote } = scaleFor(data, opts);
  const img = canvas.getContext("2d").createImageData(cols, rows);
  for (let i = 0; i < rows * cols; i++) {
    const v = data[i];
    let rgb;
    if (Number.isNaN(v)) rgb = MASKED_RGB;
    else if (opts.dropped?.[i]) rgb = DROPPED_RGB;
    else if (opts.kind === "error" && v > boundAt(opts, i)) rgb = OVER_RGB;
    else rgb = colour(map, toT(opts.bounds ? v / opts.bounds[i] : v));
    img.data.set([...rgb, 255], 4 * i);
  }
  canvas.getContext("2d").putImageData(img, 0, 0);

  const bar = document.createElement("div");
  bar.className = "hm-bar";
  bar.innerHTML =
    `<span>${short(lo)}</span><span class="hm-gradient" style="background:${gradientCss(map)}"></span>` +
    `<span>${short(hi)}</span><span class="hm-scale">${scaleNote}</span>`;
  const readout = document.createElement("div");
  readout.className = "hm-readout";
  readout.textContent = `${opts.rowLabel} × ${opts.colLabel}: hover for values`;
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const j = Math.min(cols - 1, Math.floor(((ev.clientX - r.left) / r.width) * cols));
    const i = Math.min(rows - 1, Math.floor(((ev.clientY - r.top) / r.height) * rows));
    const at = i * cols + j;
    const v = data[at];
    const what = Number.isNaN(v)
      ? "masked"
      : opts.dropped?.[at]
        ? `${fmt(v)} (dropped)`
        : opts.bounds
          ? `${fmt(v)} (its bound ${fmt(opts.bounds[at])})`
          : fmt(v);
    readout.textContent = `${opts.rowLabel} ${i}, ${opts.colLabel} ${j}: ${what}`;
  });
  fig.append(cap, canvas, bar, readout);
  return fig;
}

// The bound an error map holds element i to: its own where the map has them.
const boundAt = (opts, i) => (opts.bounds ? opts.bounds[i] : opts.bound);

function scaleFor(data, opts) {
  let max = 0;
  for (const v of data) if (!Number.isNaN(v) && Math.abs(v) > max) max = Math.abs(v);
  if (opts.kind === "signed") {
    const m = max || 1;
    return { map: "diverging", lo: -m, hi: m, toT: (v) => 0.5 + v / (2 * m), scaleNote: "linear" };
  }
  if (opts.kind === "error" && opts.bounds) {
    // Each error over its own bound, log scale up to 1: how far from failing each element is.
    return {
      map: "error",
      lo: 1e-4,
      hi: 1,
      toT: (r) => (r <= 1e-4 ? 0 : Math.log10(r / 1e-4) / 4),
      scaleNote: "log · error / its bound · red: > 1",
    };
  }
  if (opts.kind === "error") {
    // Log scale up to the bound: how far from failing each element is. 4 decades below it.
    const hi = opts.bound;
    const lo = hi * 1e-4;
    const span = Math.log10(hi / lo);
    return {
      map: "error",
      lo,
      hi,
      toT: (v) => (v <= lo ? 0 : Math.log10(v / lo) / span),
      scaleNote: "log · red: > bound",
    };
  }
  // Weights: log scale over 5 decades. A few rows (the first causal ones) hold weights near 1
  // while a typical row's are near 1 / Sk: on a linear scale those would be all dark.
  const hi = max || 1;
  const lo = hi * 1e-5;
  return {
    map: "viridis",
    lo,
    hi,
    toT: (v) => (v <= lo ? 0 : Math.log10(v / lo) / 5),
    scaleNote: "log",
  };
}
