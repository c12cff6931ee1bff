// SPDX-License-Identifier: Apache-2.0
// dom.js - building the page from data: elements whose text is always set as text (never
// parsed as HTML, so a job's name cannot become markup), and how numbers and times read.

// h('a.cls', {href: ...}, child, ...): an element; children are nodes or text (null skipped).
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name);
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export const ACTIVE = ['QUEUED', 'STARTING', 'RUNNING', 'STOPPING'];
export const STATES = ['QUEUED', 'STARTING', 'RUNNING', 'STOPPING', 'STOPPED', 'SUCCEEDED', 'FAILED', 'CANCELLED'];

export function badge(state) {
  return h('span.badge.s-' + String(state || '').toLowerCase(), {}, state || '?');
}

// 3725 -> "1h 2m"; 75 -> "1m 15s"; 4.2 -> "4.2s".
export function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  if (s < 10) return s.toFixed(1) + 's';
  s = Math.round(s);
  const d = Math.floor(s / 86400), hh = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

export const seconds = (iso) => Date.parse(iso) / 1000;

// A time of day for today's times, else the date too, in the browser's zone.
export function when(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString([], { hour12: false })
    : d.toLocaleString([], { hour12: false, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// 12345.6 -> "12.3k"
export function num(v, digits = 1) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(digits) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(digits) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(digits) + 'k';
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

// A progress bar (fraction in [0, 1], or null for none) with its label.
export function bar(fraction, label) {
  if (fraction === null || fraction === undefined || !isFinite(fraction)) return h('span.muted', {}, '–');
  const f = Math.max(0, Math.min(1, fraction));
  const inner = h('span.fill');
  inner.style.width = (f * 100).toFixed(1) + '%'; // CSSOM, which the CSP allows (not style="")
  return h('span.progress', { title: label || '' }, h('span.track', {}, inner),
    h('span.pct', {}, Math.floor(f * 100) + '%'));
}

// A job's progress as a fraction, from rank 0's report.
export function progressOf(p) {
  if (!p) return null;
  if (p.total_samples > 0 && p.samples >= 0) return p.samples / p.total_samples;
  if (p.total_steps > 0 && p.step >= 0) return p.step / p.total_steps;
  return null;
}

// A job id's colour (one of the palette in app.css), the same wherever it shows.
export function colour(id) {
  let x = 0;
  for (const c of String(id)) x = (x * 31 + c.charCodeAt(0)) >>> 0;
  return 'c' + (x % 10);
}

// Runs fn at most once per ms, the last call winning (events come in bursts).
export function debounce(fn, ms) {
  let t = null;
  const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  d.cancel = () => clearTimeout(t);
  return d;
}

export function message(el, err) {
  fill(el, err ? h('p.error', { role: 'alert' }, err.message || String(err)) : null);
}
