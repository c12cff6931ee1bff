// SPDX-License-Identifier: Apache-2.0
// jobs.js - the jobs table: newest first, a page at a time, with filters; kept live by the
// event stream (a submitted job appears, a state changes in place) and, for the jobs that
// run, by their details (workers now, progress) every few seconds.
import { api } from './api.js';
import { h, fill, badge, duration, seconds, bar, progressOf, ACTIVE, STATES, debounce, message } from './dom.js';

const PAGE = 50;
// How often the running jobs of the page get their details again (workers, progress), and
// how many such requests are in flight at once: a page of busy jobs stays a trickle.
const DETAIL_MS = 5000, DETAIL_PARALLEL = 4;
const RUNS = ['STARTING', 'RUNNING', 'STOPPING'];

// Filters and the page survive a visit to another view of the tab.
const filters = { state: '', owner: '', label: '' };
let tokens = ['']; // page i starts at tokens[i]
let pageIndex = 0;

function query() {
  const q = new URLSearchParams({ order: 'newest', page_size: String(PAGE) });
  if (tokens[pageIndex]) q.set('page_token', tokens[pageIndex]);
  for (const k of ['state', 'owner', 'label']) if (filters[k]) q.set(k, filters[k]);
  return '/v1/jobs?' + q;
}

// Whether a job the stream announced belongs in the table as filtered.
function matches(job) {
  if (filters.state && job.state !== filters.state) return false;
  if (filters.owner && job.owner !== filters.owner) return false;
  if (filters.label) {
    const [k, ...v] = filters.label.split('=');
    if (((job.spec || {}).labels || {})[k] !== v.join('=')) return false;
  }
  return true;
}

// The first page, asked for while the token is being checked (app.js): a page load's
// critical path is then one round trip, not two. Taken by the next mount, if still fresh.
let early = null;
export function prefetch(t) {
  early = { at: performance.now(), page: api('GET', query(), undefined, t) };
  const mine = early;
  early.page.catch(() => { if (early === mine) early = null; }); // the sign-in form says why
}

function elapsed(job) {
  const end = ACTIVE.includes(job.state) ? Date.now() / 1000 : seconds(job.updated_at);
  return duration(end - seconds(job.created_at));
}

export function mount(root, ctx) {
  const rows = new Map(); // id -> {job, detail, tr}
  const tbody = h('tbody');
  const note = h('div');
  const count = h('span.muted');
  const pager = h('div.pager');
  let alive = true, next = null;
  let seen = 0; // the newest event the page reflects: older ones streaming in are no news

  const apply = () => { tokens = ['']; pageIndex = 0; load(); };
  const typed = debounce(apply, 350);
  const inputs = [];
  const field = (key, attrs) => inputs[inputs.push(h('input', Object.assign({
    value: filters[key], oninput: (e) => { filters[key] = e.target.value.trim(); typed(); },
  }, attrs))) - 1];
  const stateSel = h('select', { 'aria-label': 'State', onchange: (e) => { filters.state = e.target.value; apply(); } },
    h('option', { value: '' }, 'Any state'), STATES.map((s) => h('option', { value: s, selected: filters.state === s }, s)));

  fill(root, h('section.jobs', {},
    h('div.bar-row', {},
      h('h1', {}, 'Jobs'), count,
      h('form.filters', { onsubmit: (e) => e.preventDefault() },
        stateSel,
        ctx.me.admin ? field('owner', { placeholder: 'owner', 'aria-label': 'Owner', size: 10 }) : null,
        field('label', { placeholder: 'label key=value', 'aria-label': 'Label', size: 16 }),
        h('button.link', { type: 'button', onclick: () => {
          Object.assign(filters, { state: '', owner: '', label: '' });
          for (const el of [stateSel, ...inputs]) el.value = '';
          apply();
        } }, 'Clear'))),
    note,
    h('div.table-wrap', {}, h('table.jobs-table', {},
      h('thead', {}, h('tr', {}, ['Job', 'State', 'Owner', 'Workers', 'GPUs', 'Elapsed', 'Progress'].map((c) => h('th', {}, c)))),
      tbody)),
    pager));

  function cells(r) {
    const { job, detail } = r;
    const spec = job.spec || {}, w = spec.workers || { min: 1, max: 1 }, gpw = spec.gpus_per_worker || 0;
    const now = detail && RUNS.includes(job.state) ? detail.scaling.workers : null;
    const prog = job.state === 'SUCCEEDED' ? 1 : detail ? progressOf(detail.progress) : null;
    const p = detail && detail.progress;
    return [
      h('td', {}, h('a.job', { href: '#/jobs/' + encodeURIComponent(job.id) }, job.name), h('div.id', {}, job.id)),
      h('td', {}, badge(job.state)),
      h('td', {}, job.owner),
      h('td.num', { title: `${w.min}–${w.max} requested` }, now === null ? '–' : String(now),
        h('span.muted', {}, ' / ', w.min === w.max ? String(w.max) : `${w.min}–${w.max}`)),
      h('td.num', {}, gpw ? [now === null ? '–' : String(now * gpw), h('span.muted', {}, ` / ${w.max * gpw}`)] : h('span.muted', {}, '–')),
      h('td.num.elapsed', {}, elapsed(job)),
      h('td', {}, bar(prog, p ? `step ${p.step} of ${p.total_steps}` : '')),
    ];
  }

  function render(r, flash) {
    const tr = h('tr', { dataset: { id: r.job.id, state: r.job.state } }, cells(r));
    if (flash) tr.classList.add('flash');
    if (r.tr) r.tr.replaceWith(tr);
    r.tr = tr;
    return tr;
  }

  function summary() {
    const n = {};
    for (const r of rows.values()) n[r.job.state] = (n[r.job.state] || 0) + 1;
    const parts = ['RUNNING', 'QUEUED'].filter((s) => n[s]).map((s) => `${n[s]} ${s.toLowerCase()}`);
    fill(count, `${rows.size} shown` + (parts.length ? ' · ' + parts.join(' · ') : ''));
  }

  async function load() {
    const t0 = performance.now();
    const pre = early && performance.now() - early.at < 2000 ? early.page : null;
    let page;
    early = null;
    try {
      page = await (pre || api('GET', query()));
    } catch (e) {
      if (alive) message(note, e);
      ctx.follow();
      return;
    }
    if (!alive) return;
    seen = page.last_event_id || 0;
    message(note, null);
    rows.clear();
    const frag = document.createDocumentFragment();
    for (const job of page.jobs) {
      const r = { job, detail: null, tr: null };
      rows.set(job.id, r);
      frag.append(render(r));
    }
    fill(tbody, frag);
    if (!page.jobs.length) fill(tbody, h('tr', {}, h('td.empty', { colspan: 7 },
      filters.state || filters.owner || filters.label ? 'No jobs match these filters.'
        : 'No jobs yet. Submit one with ringctl submit or POST /v1/jobs.')));
    next = page.next_page_token || null;
    pagerRender();
    summary();
    // Once the rows are painted (the task after the frame that drew them): the mark the
    // page-load benchmark and the browser tests wait for; then what can wait for it, the
    // stream (from where the page was read, so it misses nothing) and the running jobs'
    // details.
    requestAnimationFrame(() => setTimeout(() => {
      document.body.dataset.rows = String(rows.size);
      performance.mark('ringmaster:rows', { detail: { rows: rows.size, ms: performance.now() - t0 } });
      ctx.follow(page.last_event_id);
      details();
    }, 0));
  }

  function pagerRender() {
    fill(pager,
      h('button', { type: 'button', disabled: pageIndex === 0, onclick: () => { pageIndex--; load(); } }, '← Newer'),
      h('span.muted', {}, `page ${pageIndex + 1}`),
      h('button', { type: 'button', disabled: !next, onclick: () => { tokens[pageIndex + 1] = next; pageIndex++; load(); } }, 'Older →'));
  }

  // The details of the page's running jobs (or of ids), a few requests at a time.
  let fetching = false; // a round over the page is under way
  async function details(ids) {
    if (!ids) {
      if (fetching) return;
      fetching = true;
    }
    const todo = ids || [...rows.values()].filter((r) => RUNS.includes(r.job.state)).map((r) => r.job.id);
    const worker = async () => {
      for (let id; alive && (id = todo.shift()) !== undefined;) {
        try {
          const job = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
          const r = rows.get(id);
          if (!r || !alive) continue;
          r.job = Object.assign(r.job, { state: job.state, updated_at: job.updated_at });
          r.detail = job;
          render(r);
        } catch (e) { /* the next round tries again; a deleted job just stays as it was */ }
      }
    };
    await Promise.all(Array.from({ length: DETAIL_PARALLEL }, worker));
    if (!ids) fetching = false;
  }

  const timer = setInterval(() => { if (!document.hidden) details(); }, DETAIL_MS);
  const clock = setInterval(() => {
    for (const r of rows.values()) {
      if (!ACTIVE.includes(r.job.state) || !r.tr) continue;
      const td = r.tr.querySelector('.elapsed');
      if (td) td.textContent = elapsed(r.job);
    }
  }, 1000);

  // Jobs the stream announced: a few are read one by one and put on top; a burst (a
  // script submitting hundreds) reloads the first page instead, one request for them all.
  const BURST = 10;
  const arrived = new Set();
  const arrivals = debounce(async () => {
    const ids = [...arrived];
    arrived.clear();
    if (ids.length > BURST || rows.size + ids.length > 2 * PAGE) return load();
    for (const id of ids) {
      try {
        const job = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
        if (!alive || rows.has(id) || !matches(job)) continue;
        if (!rows.size) fill(tbody);
        const r = { job, detail: job, tr: null };
        rows.set(id, r);
        tbody.prepend(render(r, true));
        summary();
      } catch (e) { /* deleted already, or not ours */ }
    }
  }, 150);

  load();
  return {
    unmount() { alive = false; clearInterval(timer); clearInterval(clock); typed.cancel(); arrivals.cancel(); },
    event(type, ev) {
      if (ev.id <= seen) return;
      const r = rows.get(ev.job_id);
      if (r) {
        if (ev.state) r.job.state = ev.state;
        r.job.updated_at = ev.time;
        render(r, true);
        summary();
        if (RUNS.includes(r.job.state) || type === 'succeeded') details([ev.job_id]);
      } else if (type === 'submitted' && pageIndex === 0) {
        arrived.add(ev.job_id);
        arrivals();
      }
    },
  };
}
