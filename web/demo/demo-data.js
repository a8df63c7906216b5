// Page-side data for the demo: seeded inputs, mask presets, base64, attention weights, FLOPs.
// No GPU and no Python here, so every function can be checked from a test with a plain import.
//
// Layouts as everywhere in the harness: q, o, d_out [B, Sq, H, D]; k, v [B, Sk, Hkv, D];
// tensors are f32. Typed arrays use the platform's byte order, and every platform that runs
// WebGPU is little-endian, so a Float32Array's bytes are the harness's "<f4" bytes.

// mulberry32: a 32-bit seeded PRNG; uniform in [0, 1). Same seed, same stream, any browser.
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Box-Muller: two uniforms give two independent standard normals (both are used).
export function normals(uniform) {
  let spare = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const u = 1 - uniform(); // in (0, 1]: log(u) is finite
    const r = Math.sqrt(-2 * Math.log(u));
    const t = 2 * Math.PI * uniform();
    spare = r * Math.sin(t);
    return r * Math.cos(t);
  };
}

// Mask presets. Each has the meaning of its counterpart in inputs.make_mask (host/judge/).
export const MASK_PRESETS = {
  none: { label: "none", shape: () => null },
  // Batch element b sees its first Sk - 7b - 3 keys; the padding is -inf.
  keypad: { label: "key padding", shape: (c) => [c.batch, 1, 1, c.seq_k] },
  // Standard normal scores added to every (query, key) pair, shared by batch and heads.
  random: { label: "random additive", shape: (c) => [c.seq_q, c.seq_k] },
  // Random additive, and every 5th query row (qi % 5 == 4) -inf: rows with no visible key.
  rows: { label: "rows fully masked", shape: (c) => [c.seq_q, c.seq_k] },
};

// Each preset's label, by name (shapeText's labels).
export const MASK_LABELS = Object.fromEntries(
  Object.entries(MASK_PRESETS).map(([k, p]) => [k, p.label]),
);

// ALiBi presets (FlashAttention-2's alibi_slopes), the matrix's alibi kinds (cases.py): each
// gives the config's alibi_shape, null for none.
export const ALIBI_PRESETS = {
  none: { label: "off", shape: () => null },
  head: { label: "per head", shape: (c) => [c.num_heads] },
  batch: { label: "per B × H", shape: (c) => [c.batch, c.num_heads] },
};
// Slopes are uniform in [0, ALIBI_MAX_SLOPE): FlashAttention-2's test draw, as in
// inputs.make_inputs.
const ALIBI_MAX_SLOPE = 0.3;

// The inputs of a case: q, k, v, d_out (and mask) as Float32Arrays, drawn in that order from
// one normal stream seeded by `seed`; then the ALiBi slopes (cfg.alibi_shape) from the same
// uniform stream. Drawn last, so that turning ALiBi on leaves every other tensor as it was.
export function makeInputs(cfg, preset, seed) {
  const uniform = mulberry32(seed);
  const next = normals(uniform);
  const fill = (n) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = next();
    return a;
  };
  const qn = totalRows(cfg.cu_seqlens_q, cfg.batch * cfg.seq_q) * cfg.num_heads * cfg.head_dim;
  const kvn =
    totalRows(cfg.cu_seqlens_k, cfg.batch * cfg.seq_k) *
    (cfg.num_kv_heads ?? cfg.num_heads) *
    cfg.head_dim;
  const x = { q: fill(qn), k: fill(kvn), v: fill(kvn), d_out: fill(qn) };
  const mask = makeMask(cfg, preset, fill);
  if (mask) x.mask = mask;
  if (cfg.alibi_shape) {
    const n = cfg.alibi_shape.reduce((a, b) => a * b, 1);
    x.alibi_slopes = Float32Array.from({ length: n }, () => ALIBI_MAX_SLOPE * uniform());
  }
  return x;
}

function makeMask(cfg, preset, fill) {
  const { batch: B, seq_q: Sq, seq_k: Sk } = cfg;
  if (preset === "none") return null;
  if (preset === "keypad") {
    const m = new Float32Array(B * Sk);
    for (let b = 0; b < B; b++) {
      for (let kj = Math.max(0, Sk - 7 * b - 3); kj < Sk; kj++) m[b * Sk + kj] = -Infinity;
    }
    return m;
  }
  const m = fill(Sq * Sk);
  if (preset === "rows") {
    for (let qi = 4; qi < Sq; qi += 5) m.fill(-Infinity, qi * Sk, (qi + 1) * Sk);
  } else if (preset !== "random") {
    throw new Error(`mask: unknown preset ${JSON.stringify(preset)}`);
  }
  return m;
}

export function toBase64(f32) {
  const bytes = new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength);
  if (bytes.toBase64) return bytes.toBase64();
  let s = "";
  // In slices: String.fromCharCode(...all) overflows the call stack for large tensors.
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

export function fromBase64(b64) {
  let bytes;
  if (Uint8Array.fromBase64) {
    bytes = Uint8Array.fromBase64(b64);
  } else {
    const s = atob(b64);
    bytes = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  }
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

// FlashAttention's count (its benchmarks): forward 4·B·H·Sq·Sk·D (two matmuls, 2 FLOPs per
// multiply-add; a variable-length batch: the sum over its sequences), backward 2.5× forward
// (five matmuls instead of two), both halved for causal. Windows and masks are not
// discounted.
export function flops(cfg) {
  let scores = 0;
  for (const s of sequences(cfg)) scores += s.lq * s.lk;
  const fwd = (4 * cfg.num_heads * scores * cfg.head_dim) / (cfg.causal ? 2 : 1);
  return { forward: fwd, backward: 2.5 * fwd };
}

// The form's variable-length batch ("77:130, 0:5": query:key lengths per sequence) as
// [lensQ, lensK]; null when empty (a dense batch). Throws an Error naming the field.
export function parseSeqlens(text) {
  const t = String(text ?? "").trim();
  if (!t) return null;
  const lensQ = [];
  const lensK = [];
  for (const part of t.split(",")) {
    const m = /^\s*(\d{1,9})\s*:\s*(\d{1,9})\s*$/.exec(part);
    if (!m) {
      const got = JSON.stringify(part.trim().slice(0, 40));
      throw new Error(`seqlens: each sequence is queries:keys, e.g. 77:130; got ${got}`);
    }
    lensQ.push(Number(m[1]));
    lensK.push(Number(m[2]));
  }
  return [lensQ, lensK];
}

// FlashAttention-2's cu_seqlens of some lengths: their running sum from 0.
export function cuSeqlens(lens) {
  const cu = [0];
  for (const n of lens) cu.push(cu[cu.length - 1] + n);
  return cu;
}

// Rows of a packed tensor: the last cu_seqlens entry, or the dense count.
const totalRows = (cu, dense) => (cu ? cu[cu.length - 1] : dense);

// AttentionConfig.sequences and sequence_offset: per batch element, its first query and key
// rows, lengths, and causal offset (a variable-length batch aligns each sequence
// bottom-right: causal_offset + lk - lq).
export function sequences(cfg) {
  const out = [];
  for (let b = 0; b < cfg.batch; b++) {
    const cq = cfg.cu_seqlens_q;
    const ck = cfg.cu_seqlens_k;
    const s = cq
      ? { q0: cq[b], lq: cq[b + 1] - cq[b], k0: ck[b], lk: ck[b + 1] - ck[b] }
      : { q0: b * cfg.seq_q, lq: cfg.seq_q, k0: b * cfg.seq_k, lk: cfg.seq_k };
    s.offset = cfg.causal_offset + (cq ? s.lk - s.lq : 0);
    out.push(s);
  }
  return out;
}

// PCG hash, as fa2_pcg in the WGSL and dropout.pcg on the host (u32 arithmetic).
function pcg(v) {
  const state = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> ((state >>> 28) + 4)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

// Whether the kernel keeps weight (b, h, qi, kj) under dropout p with this seed.
export function dropoutKeep(p, seed, numHeads, b, h) {
  const p32 = Math.fround(p);
  const x = ((seed >>> 0) ^ pcg(b * numHeads + h)) >>> 0;
  return (qi, kj) => {
    if (p32 <= 0) return true;
    const bits = pcg(x ^ pcg(qi ^ pcg(kj))) >>> 8;
    return bits / 16777216 >= p32; // exact: bits < 2**24
  };
}

// The keys query qi sees, as config.kernel_window puts every rule: key kj is visible when
// -left <= kj - qa <= right, qa = qi + causal_offset (either sign: negative aligns the
// queries bottom-right when Sq > Sk). A symmetric window w is left = right = w - 1,
// window_left / window_right of -1 are unbounded, causal caps right at 0.
export function visibleWindow(cfg) {
  let left = Infinity;
  let right = Infinity;
  if (cfg.window > 0) {
    left = right = cfg.window - 1;
  } else {
    if ((cfg.window_left ?? -1) >= 0) left = cfg.window_left;
    if ((cfg.window_right ?? -1) >= 0) right = cfg.window_right;
  }
  if (cfg.causal) right = Math.min(right, 0);
  return { left, right };
}

// The ALiBi slope of batch b, head h (0 without ALiBi): slopes [H] are every batch element's,
// [B, H] one row per batch element.
export function alibiSlope(cfg, slopes, b, h) {
  if (!cfg.alibi_shape || !slopes) return 0;
  return slopes[(cfg.alibi_shape.length === 2 ? b * cfg.num_heads : 0) + h];
}

// Softmax weights P [Sq, Sk] of batch b, head h, in float64, as the reference defines
// them (host/judge/reference.py: Setting.scored, _softmax): the score is softcap · tanh(scale · q.k / softcap) (with a softcap, its f32 value),
// minus slope · |kj - qa| (ALiBi, reference.alibi_bias), plus the mask; NaN where a key is
// absent (visibleWindow, or a score <= -1e30), and `dropped` marks the weights that dropout
// zeroes (P itself is drawn before dropout).
export function attentionWeights(cfg, x, b, h) {
  const { num_heads: H, head_dim: D } = cfg;
  const { q0, lq: Sq, k0, lk: Sk, offset } = sequences(cfg)[b];
  const Hkv = cfg.num_kv_heads ?? H;
  const kh = Math.floor(h / (H / Hkv));
  const scale = Math.fround(cfg.scale ?? 1 / Math.sqrt(D));
  const cap = cfg.softcap ? Math.fround(cfg.softcap) : 0;
  const slope = alibiSlope(cfg, x.alibi_slopes, b, h);
  const { left, right } = visibleWindow(cfg);
  const maskAt = maskIndexer(cfg, x.mask);
  const keep = dropoutKeep(cfg.dropout_p, cfg.seed, H, b, h);
  const p = new Float64Array(Sq * Sk);
  const dropped = new Uint8Array(Sq * Sk);
  const s = new Float64Array(Sk);
  for (let qi = 0; qi < Sq; qi++) {
    const qa = qi + offset;
    const qo = ((q0 + qi) * H + h) * D;
    let m = -Infinity;
    for (let kj = 0; kj < Sk; kj++) {
      let visible = kj - qa >= -left && kj - qa <= right;
      let score = NaN;
      if (visible) {
        const ko = ((k0 + kj) * Hkv + kh) * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += x.q[qo + d] * x.k[ko + d];
        score = scale * dot;
        if (cap) score = cap * Math.tanh(score / cap);
        score -= slope * Math.abs(kj - qa);
        score += maskAt(b, h, qi, kj);
        visible = score > -1e30;
      }
      s[kj] = visible ? score : NaN;
      if (visible && score > m) m = score;
    }
    let den = 0;
    for (let kj = 0; kj < Sk; kj++) if (!Number.isNaN(s[kj])) den += Math.exp(s[kj] - m);
    for (let kj = 0; kj < Sk; kj++) {
      const i = qi * Sk + kj;
      p[i] = Number.isNaN(s[kj]) ? NaN : Math.exp(s[kj] - m) / den;
      dropped[i] = !Number.isNaN(s[kj]) && !keep(qi, kj) ? 1 : 0;
    }
  }
  return { p, dropped };
}

// mask_shape broadcast to [B, H, Sq, Sk] (AttentionConfig.mask_strides): a lookup function.
function maskIndexer(cfg, mask) {
  if (!mask || !cfg.mask_shape) return () => 0;
  const shape = [1, 1, 1, 1, ...cfg.mask_shape].slice(-4);
  const strides = [0, 0, 0, 0];
  let step = 1;
  for (let axis = 3; axis >= 0; axis--) {
    strides[axis] = shape[axis] === 1 ? 0 : step;
    step *= shape[axis];
  }
  return (b, h, qi, kj) =>
    mask[b * strides[0] + h * strides[1] + qi * strides[2] + kj * strides[3]];
}

// One head's [S, D] slice of rows [row0, row0 + S) of a [rows, Hx, D] tensor (a dense
// [B, S, Hx, D] one's batch element b starts at row b·S).
export function headSlice(t, row0, S, Hx, D, h) {
  const out = new Float32Array(S * D);
  for (let s = 0; s < S; s++) {
    const r = row0 + s;
    out.set(t.subarray((r * Hx + h) * D, (r * Hx + h + 1) * D), s * D);
  }
  return out;
}
