// SPDX-License-Identifier: Apache-2.0
// chart.js - small SVG charts: a step series over time (a job's size, the cluster's use)
// and bars with a line (throughput per size). Drawn with attributes and classes only: the
// page's Content-Security-Policy allows no inline style.

const NS = 'http://www.w3.org/2000/svg';
// The drawing's size in its own units: the <svg> scales to its box, so a chart meant for a
// wide box gets a wider drawing (its text keeps its size) rather than a magnified one.
const SIZES = { normal: [640, 200], wide: [1240, 220] };
const L = 44, R = 12, T = 20, B = 26; // the plot area's margins

function s(tag, attrs, ...kids) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

// The step between ticks of an axis from 0 to max: about n of them, 1/2/5 x 10^k apart.
function step(max, n) {
  const raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
}

function ticks(max, n) {
  if (!(max > 0)) return [0];
  const st = step(max, n), out = [];
  for (let v = 0; v <= max + 1e-9; v += st) out.push(Math.round(v * 1e6) / 1e6);
  return out;
}

// The top of a value axis: the first tick at or above the largest value.
const top = (vmax) => Math.ceil(vmax / step(vmax, 4)) * step(vmax, 4);

const clock = (t, secs) => new Date(t * 1000).toLocaleTimeString([], { hour12: false, hour: '2-digit', minute: '2-digit', second: secs ? '2-digit' : undefined });

function frame(svg, W, H, yMax, yLabel, fmt) {
  const y = (v) => T + (H - T - B) * (1 - v / yMax);
  for (const v of ticks(yMax, 4)) {
    svg.append(s('line', { class: 'gridline', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s('text', { class: 'tick', x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmt ? fmt(v) : v));
  }
  if (yLabel) svg.append(s('text', { class: 'axis-label', x: 4, y: 10 }, yLabel));
  return y;
}

export function stepChart({ series, guides = [], yLabel, title, wide }) {
  const [W, H] = SIZES[wide ? 'wide' : 'normal'];
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title || yLabel || 'chart' });
  const all = series.flatMap((x) => x.points);
  if (!all.length) {
    svg.append(s('text', { class: 'empty', x: W / 2, y: H / 2, 'text-anchor': 'middle' }, 'nothing yet'));
    return svg;
  }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(t0 + 1, ...all.map((p) => p[0]));
  const vmax = Math.max(1, ...all.map((p) => p[1]), ...guides.map((g) => g.v));
  const yMax = top(vmax);
  const y = frame(svg, W, H, yMax, yLabel);
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  for (const t of ticks(t1 - t0, 4)) {
    svg.append(s('text', { class: 'tick', x: x(t0 + t), y: H - 8, 'text-anchor': 'middle' }, clock(t0 + t, t1 - t0 < 3600)));
  }
  for (const g of guides) {
    svg.append(s('line', { class: 'guide ' + (g.cls || ''), x1: L, x2: W - R, y1: y(g.v), y2: y(g.v) }));
    if (g.label) svg.append(s('text', { class: 'guide-label', x: W - R - 2, y: y(g.v) - 3, 'text-anchor': 'end' }, g.label));
  }
  for (const ser of series) {
    if (!ser.points.length) continue;
    let d = '';
    ser.points.forEach(([t, v], i) => {
      d += i === 0 ? `M${x(t).toFixed(1)},${y(v).toFixed(1)}`
        : `H${x(t).toFixed(1)}V${y(v).toFixed(1)}`;
    });
    const area = d + `V${y(0).toFixed(1)}H${x(ser.points[0][0]).toFixed(1)}Z`;
    svg.append(s('path', { class: 'area ' + (ser.cls || ''), d: area }));
    svg.append(s('path', { class: 'line ' + (ser.cls || ''), d }, s('title', {}, ser.label || '')));
  }
  return svg;
}

/*
 * Bars for categories, with an optional line over them: cats [label], bars [value|null]
 * (null: no bar), line [value|null]. Returns the <svg>.
 */
export function barChart({ cats, bars, line, yLabel, barLabel, lineLabel, fmt }) {
  const [W, H] = SIZES.normal;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': yLabel || 'chart' });
  const vmax = Math.max(1, ...bars.filter((v) => v !== null), ...(line || []).filter((v) => v !== null));
  const yMax = top(vmax);
  const y = frame(svg, W, H, yMax, yLabel, fmt);
  const slot = (W - L - R) / Math.max(1, cats.length), bw = Math.min(48, slot * 0.6);
  const cx = (i) => L + slot * (i + 0.5);
  cats.forEach((c, i) => {
    svg.append(s('text', { class: 'tick', x: cx(i), y: H - 8, 'text-anchor': 'middle' }, c));
    if (bars[i] !== null && bars[i] !== undefined) {
      svg.append(s('rect', { class: 'bar', x: cx(i) - bw / 2, y: y(bars[i]), width: bw, height: Math.max(0, y(0) - y(bars[i])) },
        s('title', {}, `${barLabel || ''} ${c}: ${fmt ? fmt(bars[i]) : bars[i]}`)));
    }
  });
  if (line) {
    const pts = line.map((v, i) => (v === null ? null : [cx(i), y(v)])).filter(Boolean);
    if (pts.length > 1) svg.append(s('polyline', { class: 'trend', points: pts.map((p) => p.join(',')).join(' ') }));
    pts.forEach((p, i) => svg.append(s('circle', { class: 'dot', cx: p[0], cy: p[1], r: 3.5 }, s('title', {}, lineLabel || ''))));
  }
  return svg;
}
