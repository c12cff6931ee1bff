// SPDX-License-Identifier: Apache-2.0
// app.js - the dashboard's shell: signing in with a token, the one event stream the tab
// holds, and the views behind the #/ routes (jobs, a job, the cluster, the scheduler).
//
// A tab holds at most two streams of its token's streams_per_token (32 by default): one of
// every job's events, and a job page's log follow. Each view reads the API itself and gets
// the stream's events from here.
import { api, token, eventStream, onUnauthorized, ApiError } from './api.js';
import { h, fill } from './dom.js';
import * as jobs from './jobs.js';

// The other views load when first shown: a page load, which shows the jobs, parses only
// what the table needs.
// A load that failed (ringd restarting) is tried again next time.
const lazy = (path) => {
  let m = null;
  return () => (m = m || import(path).catch((e) => { m = null; throw e; }));
};
const job = lazy('./job.js'), cluster = lazy('./cluster.js'), scheduler = lazy('./scheduler.js');

const main = document.getElementById('main');
const ctx = { me: null };
let stream = null, view = null;

// Who the token speaks for: its own entry of GET /v1/tokens (a token's id is the part
// between "ringd_" and the secret). Without auth, ringd's one local caller, an admin.
async function whoami(t) {
  const list = await api('GET', '/v1/tokens', undefined, t);
  if (!t) return { name: 'local', admin: true, noAuth: true };
  const id = t.slice(6, 18);
  const mine = (list.tokens || list).find((x) => x.id === id);
  return mine ? { name: mine.name, admin: !!mine.admin } : { name: '?', admin: false };
}

function live(state) {
  const el = document.getElementById('live');
  const text = state instanceof ApiError ? `stream: ${state.message}` : state;
  el.textContent = state === 'live' ? 'live' : state === 'reconnecting' ? 'reconnecting…' : text;
  el.className = 'live ' + (state === 'live' ? 'on' : 'off');
  el.title = state instanceof ApiError ? state.message : 'The live event stream';
}

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const m = hash.match(/^\/jobs\/([^/?]+)$/);
  if (m) {
    let id = m[1];
    try { id = decodeURIComponent(id); } catch (e) { /* not %-encoded after all: as typed */ }
    return { name: 'jobs', load: job, arg: id };
  }
  if (hash.startsWith('/cluster')) return { name: 'cluster', load: cluster };
  if (hash.startsWith('/scheduler')) return { name: 'scheduler', load: scheduler };
  return { name: 'jobs', load: null };
}

let shown = 0; // which show() is the latest: a view that loads late must not replace a newer one
async function show() {
  if (!ctx.me) return;
  const r = route(), mine = ++shown;
  if (view) view.unmount();
  view = null;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('here', a.dataset.view === r.name);
  let mod = jobs;
  if (r.load) {
    try {
      mod = await r.load();
    } catch (e) {
      fill(main, h('p.error', {}, `Cannot load this view: ${e.message}`));
      return;
    }
  }
  if (mine !== shown || !ctx.me) return;
  const root = h('div.view');
  fill(main, root);
  view = mod.mount(root, ctx, r.arg);
  window.scrollTo(0, 0);
}

function signOut(why) {
  if (stream) stream.close();
  stream = null;
  if (view) view.unmount();
  view = null;
  ctx.me = null;
  token.clear();
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  login(why);
}

// The stream of every job's events, opened once per sign-in by the first view that asks:
// after the event its first read reflects (the jobs list's last_event_id), so that nothing
// falls between what it read and what streams in; or, without one, at the newest.
ctx.follow = (after) => {
  if (stream || !ctx.me) return;
  const q = after === undefined ? '' : `?after=${encodeURIComponent(after)}`;
  stream = eventStream('/v1/events' + q, (type, ev) => { if (view) view.event(type, ev); }, live);
  stream.opened.catch(() => {}); // live() shows it; the stream keeps trying
};

function start(me) {
  ctx.me = me;
  fill(document.getElementById('me'), h('strong', {}, me.name), me.admin ? ' · admin' : '', me.noAuth ? ' (no auth)' : '');
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  document.getElementById('signout').hidden = !!me.noAuth;
  show();
}

function login(why) {
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'ringd_…', 'aria-label': 'API token', required: true });
  const err = h('p.error', { role: 'alert', id: 'login-error', hidden: !why }, why ? why.message : '');
  const go = h('button', { type: 'submit', id: 'signin' }, 'Sign in');
  const form = h('form.login', {}, h('h1', {}, 'Sign in to ringd'),
    h('p', {}, 'Paste an API token: the admin token from the data directory\'s admin.token, or one an admin made with POST /v1/tokens. It stays in this tab only.'),
    h('label', {}, 'Token', input), err, go);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    go.disabled = true;
    try {
      const me = await whoami(t);
      token.set(t);
      start(me);
    } catch (x) {
      err.hidden = false;
      err.textContent = x.status === 401 ? `ringd refused this token: ${x.message}.`
        : x.status === 0 ? `Cannot sign in: ${x.message}.` : `Cannot sign in: ${x.message}`;
      input.select();
    } finally {
      go.disabled = false;
    }
  });
  fill(main, form);
  input.focus();
}

onUnauthorized((e) => signOut(new ApiError(401, { detail: `signed out, as ringd no longer accepts the token: ${e.message}` })));
document.getElementById('signout').addEventListener('click', () => signOut(null));
window.addEventListener('hashchange', show);

(async () => {
  const t = token.get();
  // The first page of jobs is asked for with the check of the token, not after it: the
  // table is what a load waits for.
  if (!route().load) jobs.prefetch(t);
  try {
    // A stored token, or none on a ringd without auth; otherwise the form.
    start(await whoami(t));
  } catch (e) {
    if (t && e.status === 401) token.clear();
    login(t && e.status === 401 ? new ApiError(401, { detail: `ringd refused the saved token: ${e.message}` })
      : e.status === 401 ? null : e);
  }
})();
