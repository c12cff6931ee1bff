// SPDX-License-Identifier: Apache-2.0
// api.js - ringd's API from the page: the token, JSON requests whose errors are the API's
// problem details, and streams (Server-Sent Events, logs) read with fetch. EventSource
// cannot send an Authorization header, and the token must never go into a URL (logs,
// history, Referer), so streams are fetches whose bodies are read as they arrive.

const KEY = 'ringmaster.token';

// The token lives in this tab's session storage: typed once, gone with the tab, never in a
// URL or a cookie (so no other site's page can make the browser send it).
export const token = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

// A failed request: status (0 when ringd did not answer) and the problem's fields.
export class ApiError extends Error {
  constructor(status, problem) {
    const p = problem || {};
    super(p.detail || p.title || `HTTP ${status}`);
    this.status = status;
    this.kind = (p.type || '').replace('urn:ringmaster:problem:', '');
    this.retryAfter = 0;
  }
}

let lapsed = () => {};
// Whom to tell when the token stops working (401 on any request, or a stream's last event).
export function onUnauthorized(fn) { lapsed = fn; }

function headers(extra, t) {
  const h = Object.assign({}, extra);
  const tok = t === undefined ? token.get() : t;
  if (tok) h.Authorization = 'Bearer ' + tok;
  return h;
}

async function problemOf(r) {
  const text = await r.text().catch(() => '');
  let p = null;
  try { p = JSON.parse(text); } catch (e) { p = { detail: text.slice(0, 300) }; }
  const err = new ApiError(r.status, p);
  err.retryAfter = Number(r.headers.get('Retry-After')) || 0;
  return err;
}

async function send(path, init, t) {
  let r;
  try {
    r = await fetch(path, Object.assign({ cache: 'no-store', credentials: 'omit' }, init));
  } catch (e) {
    // A token with characters no header may hold fails here too, before anything is sent.
    throw new ApiError(0, { detail: e instanceof TypeError && /header/i.test(e.message)
      ? 'that is not a token: it holds characters a token never has'
      : 'ringd did not answer (' + e.message + ')' });
  }
  if (!r.ok) {
    const err = await problemOf(r);
    if (r.status === 401 && t === undefined) lapsed(err);
    throw err;
  }
  return r;
}

// A JSON request; resolves to the parsed body (null for 204), rejects with an ApiError.
// t: a token to try instead of the stored one (signing in).
export async function api(method, path, body, t) {
  const init = { method, headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }, t) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const r = await send(path, init, t);
  if (r.status === 204) return null;
  return r.json();
}

// A log's text and the offset to continue from (X-Ring-Log-Offset).
export async function text(path) {
  const r = await send(path, { headers: headers({}) });
  return { text: await r.text(), offset: Number(r.headers.get('X-Ring-Log-Offset')) || 0 };
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// Reads body (a ReadableStream of bytes) as text chunks into onText until it ends.
async function pump(body, onText) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onText(dec.decode(value, { stream: true }));
  }
}

// Splits Server-Sent Events text as it arrives into events {id, event, data}.
function sseParser(onEvent) {
  let buf = '', ev = {};
  return (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (ev.id !== undefined || ev.data !== undefined) onEvent(ev);
        ev = {};
      } else if (line[0] !== ':') {
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'data') ev.data = ev.data === undefined ? value : ev.data + '\n' + value;
        else if (field === 'id' || field === 'event') ev[field] = value;
      }
    }
  };
}

// The most a stream waits before it tries again after losing its connection.
const BACKOFF_MAX_MS = 15000;

/*
 * Follows the event stream at path for as long as it is open: onEvent(type, data) for each
 * event, onStatus('live' | 'reconnecting' | problem) as the connection comes and goes. A
 * dropped connection is resumed after the last event seen (Last-Event-ID), so no event is
 * lost or repeated. Returns {opened: a promise settled by the first answer, close()}.
 */
export function eventStream(path, onEvent, onStatus) {
  const ctl = new AbortController();
  let last = null, backoff = 500, settle;
  const opened = new Promise((resolve, reject) => { settle = { resolve, reject }; });
  const dispatch = (ev) => {
    if (ev.id !== undefined) last = ev.id;
    if (ev.data === undefined) return;
    let data = null;
    try { data = JSON.parse(ev.data); } catch (e) { return; }
    if (ev.event === 'unauthorized' || ev.event === 'token-expired') {
      lapsed(new ApiError(401, data));
      ctl.abort();
      return;
    }
    onEvent(ev.event || 'message', data);
  };
  (async () => {
    while (!ctl.signal.aborted) {
      const h = headers({ Accept: 'text/event-stream' });
      if (last !== null) h['Last-Event-ID'] = last;
      try {
        const r = await send(path, { headers: h, signal: ctl.signal });
        settle.resolve();
        onStatus('live');
        backoff = 500;
        await pump(r.body, sseParser(dispatch));
      } catch (e) {
        if (ctl.signal.aborted) return;
        settle.reject(e);
        if (e.status === 401) return; // lapsed() took over
        onStatus(e);
        if (e.retryAfter) backoff = Math.max(backoff, e.retryAfter * 1000);
      }
      if (ctl.signal.aborted) return;
      onStatus('reconnecting');
      await sleep(backoff, ctl.signal);
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
    }
  })();
  return { opened, close: () => ctl.abort() };
}

// Follows a log (GET .../logs?follow=1) into onText until the job ends or close().
// Resolves when the stream ends; rejects with an ApiError when it could not start.
export function follow(path, onText) {
  const ctl = new AbortController();
  const done = (async () => {
    try {
      const r = await send(path, { headers: headers({}), signal: ctl.signal });
      await pump(r.body, onText);
    } catch (e) {
      if (!ctl.signal.aborted) throw e;
    }
  })();
  return { done, close: () => ctl.abort() };
}
