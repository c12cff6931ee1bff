// SPDX-License-Identifier: Apache-2.0
// app.js - the dashboard's shell: signing in with a token, the one event stream the tab
// holds, and the views behind the #/ routes (jobs, a job, the cluster, the scheduler).
//
// A tab holds at most two streams of its token's streams_per_token (32 by default): this
// one of every job's events, and a job page's log follow. Each view reads the API itself
// and gets the stream's events from here.
import { api, token, eventStream, onUnauthorized, ApiError } from './api.js';
import { h, fill } from './dom.js';
import * as jobs from './jobs.js';
import * as job from './job.js';
import * as cluster from './cluster.js';
import * as scheduler from './scheduler.js';

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
  if (m) return { name: 'jobs', mod: job, arg: decodeURIComponent(m[1]) };
  if (hash.startsWith('/cluster')) return { name: 'cluster', mod: cluster };
  if (hash.startsWith('/scheduler')) return { name: 'scheduler', mod: scheduler };
  return { name: 'jobs', mod: jobs };
}

function show() {
  if (!ctx.me) return;
  if (view) view.unmount();
  const r = route();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('here', a.dataset.view === r.name);
  const root = h('div.view');
  fill(main, root);
  view = r.mod.mount(root, ctx, r.arg);
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

// The stream first, then the view: a view reads its data after the stream has started
// (at the newest event), so no change falls between what it read and what streams in.
async function start(me) {
  ctx.me = me;
  stream = eventStream('/v1/events', (type, ev) => { if (view) view.event(type, ev); }, live);
  try {
    await stream.opened;
  } catch (e) { /* live() shows it; the stream keeps trying */ }
  if (!ctx.me) return;
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
      await start(me);
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

onUnauthorized((e) => signOut(new ApiError(401, { detail: `signed out: ${e.message}` })));
document.getElementById('signout').addEventListener('click', () => signOut(null));
window.addEventListener('hashchange', show);

(async () => {
  const t = token.get();
  try {
    // A stored token, or none on a ringd without auth; otherwise the form.
    await start(await whoami(t));
  } catch (e) {
    if (t && e.status === 401) token.clear();
    login(t && e.status === 401 ? new ApiError(401, { detail: `ringd refused the saved token: ${e.message}` })
      : e.status === 401 ? null : e);
  }
})();
