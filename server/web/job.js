// SPDX-License-Identifier: Apache-2.0
// job.js - one job: its size over time, throughput per size (observed, and the model's
// prediction beside it), restarts and their cost, progress, events and live logs per rank,
// with the buttons its owner (or an admin) may use.
import { api, text, follow } from './api.js';
import { h, fill, badge, duration, seconds, when, num, bar, progressOf, ACTIVE, debounce, message } from './dom.js';
import { stepChart, barChart } from './chart.js';

// The most of a log the page holds: a log follows its rank for as long as the job runs, and
// a page must not grow without bound. The tail a log starts with is a screenful or two.
const LOG_KEEP = 256 * 1024, LOG_TAIL = 400;
// How often a running job's details are read again (progress, time run).
const REFRESH_MS = 5000;

const card = (title, ...body) => h('section.card', {}, h('h2', {}, title), ...body);

// The job's size over time: each attempt at its size, 0 between attempts (the restarts).
function sizeChart(job) {
  const hist = job.scaling.history, w = job.spec.workers || { min: 1, max: 1 };
  const pts = [];
  hist.forEach((a, i) => {
    const start = seconds(a.started_at);
    const end = a.ended_at ? seconds(a.ended_at) : start + a.ran_s;
    pts.push([start, a.workers]);
    pts.push([end, a.ended_at ? 0 : a.workers]);
    if (a.ended_at && i === hist.length - 1 && ACTIVE.includes(job.state)) pts.push([Date.now() / 1000, 0]);
  });
  const svg = stepChart({
    series: [{ points: pts, cls: 's0', label: 'workers' }],
    guides: [{ v: w.max, cls: 'max', label: `max ${w.max}` }].concat(w.min !== w.max ? [{ v: w.min, cls: 'min', label: `min ${w.min}` }] : []),
    yLabel: 'workers', title: 'workers over time',
  });
  const sizes = hist.map((a) => a.workers);
  svg.dataset.sizes = sizes.join(',');
  if (hist.length) svg.dataset.lastRan = String(hist[hist.length - 1].ran_s); // what it drew
  const resizes = sizes.filter((s, i) => i > 0 && s !== sizes[i - 1]).length;
  return [svg, h('p.caption', {}, sizes.length ? `Sizes: ${sizes.join(' → ')}` : 'Not started yet.',
    resizes ? ` (${resizes} resize${resizes > 1 ? 's' : ''})` : '')];
}

function throughput(job) {
  const t = job.scaling.throughput;
  const sps = (v) => num(v) + '/s';
  return [
    barChart({ cats: t.map((r) => String(r.workers)), bars: t.map((r) => r.observed_samples_per_s),
      line: t.map((r) => r.predicted_samples_per_s), yLabel: 'samples/s', barLabel: 'observed at',
      lineLabel: 'predicted by the speed model', fmt: num }),
    h('p.caption', {}, h('span.key.observed'), 'observed  ', h('span.key.predicted'), 'predicted by the speed model the dynamic policy uses'),
    h('table.small', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Workers'), h('th', {}, 'Observed'), h('th', {}, 'Predicted'))),
      h('tbody', {}, t.map((r) => h('tr', {}, h('td.num', {}, r.workers),
        h('td.num', {}, r.observed_samples_per_s === null ? '–' : sps(r.observed_samples_per_s)),
        h('td.num', {}, sps(r.predicted_samples_per_s)))))),
  ];
}

// How an attempt ended, in short (the whole reason, which may run long, as its tooltip).
function ended(a) {
  if (!a.ended_at) return h('td', {}, 'running');
  const why = `${a.reason || ''}${a.exit_status !== undefined ? ` (exit ${a.exit_status})` : ''}`;
  return h('td.reason', { title: why }, why.length > 90 ? why.slice(0, 89) + '…' : why);
}

function restarts(job) {
  const o = job.scaling.restart_overhead_s;
  const each = (o.stop || 0) + (o.start || 0);
  return [
    h('p', {}, o.restarts ? [h('strong', {}, String(o.restarts)), ` restart${o.restarts > 1 ? 's' : ''}: stop ${duration(o.stop)} + start ${duration(o.start)} each (means), about `,
      h('strong', {}, duration(each * o.restarts)), ' of the job lost to them.'] : 'No restarts.'),
    h('div.table-wrap', {}, h('table.small', {},
      h('thead', {}, h('tr', {}, ['#', 'Workers', 'Hosts', 'GPUs', 'Started', 'Ran', 'Stop', 'Start', 'Samples/s', 'Ended'].map((c) => h('th', {}, c)))),
      h('tbody', {}, job.attempts.map((a) => h('tr', {},
        h('td.num', {}, a.number), h('td.num', {}, a.world_size), h('td', {}, a.hosts), h('td', {}, a.gpus || '–'),
        h('td', {}, when(a.started_at)), h('td.num', {}, duration(a.ran_s)),
        h('td.num', {}, duration(a.stop_overhead_s)), h('td.num', {}, duration(a.start_overhead_s)),
        h('td.num', {}, num(a.samples_per_s)),
        ended(a)))))),
  ];
}

function progress(job) {
  const p = job.progress;
  if (!p) return h('p.muted', {}, ACTIVE.includes(job.state) ? 'No progress reported yet.' : 'No progress report.');
  const facts = [['epoch', p.epoch !== undefined ? `${p.epoch} / ${p.epochs}` : null], ['step', p.total_steps ? `${p.step} / ${p.total_steps}` : null],
    ['samples/s', num(p.samples_per_s)], ['loss', p.loss !== undefined ? Number(p.loss).toFixed(4) : null], ['world size', p.world_size]];
  return [bar(progressOf(p)), h('dl.facts', {}, facts.filter((f) => f[1] !== null && f[1] !== undefined).map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]))];
}

function eventRow(e) {
  return h('li', {}, h('time', {}, when(e.time)), ' ', h('span.etype', {}, e.type), ' ', e.state ? badge(e.state) : null, ' ', e.message || '');
}

export function mount(root, ctx, id) {
  const path = '/v1/jobs/' + encodeURIComponent(id);
  const head = h('div.head'), actions = h('div.actions'), note = h('div');
  const size = h('div'), thr = h('div'), rst = h('div'), prog = h('div');
  const events = h('ol.events'), logView = h('pre.log', { tabindex: 0 });
  const rankSel = h('select', { 'aria-label': 'Rank' }), streamSel = h('select', { 'aria-label': 'Stream' },
    ['stdout', 'stderr', 'launcher'].map((s) => h('option', { value: s }, s)));
  const followBox = h('input', { type: 'checkbox', checked: true, 'aria-label': 'Follow' });
  let job = null, alive = true, log = null, armed = null;

  fill(root, h('section.job', {},
    h('p.crumbs', {}, h('a', { href: '#/' }, '← Jobs')), head, actions, note,
    h('div.grid', {},
      card('Size over time', size), card('Throughput per size', thr),
      card('Progress', prog), card('Events', events),
      h('section.card.wide', {}, h('h2', {}, 'Restarts and their cost'), rst),
      h('section.card.wide', {}, h('h2', {}, 'Logs'),
        h('div.controls', {}, h('label', {}, 'Rank ', rankSel), h('label', {}, 'Stream ', streamSel), h('label', {}, followBox, ' follow')),
        logView))));

  function renderHead() {
    const w = job.spec.workers || { min: 1, max: 1 };
    const end = ACTIVE.includes(job.state) ? Date.now() / 1000 : seconds(job.updated_at);
    fill(head, h('h1', {}, job.name, ' ', badge(job.state)),
      h('p.meta', {}, h('code', {}, job.id), ` · owner ${job.owner}`, job.user ? ` · runs as ${job.user}` : '',
        ` · submitted ${when(job.created_at)} · ${duration(end - seconds(job.created_at))}`,
        ` · ${w.min === w.max ? w.max : `${w.min}–${w.max}`} workers`, job.spec.gpus_per_worker ? ` × ${job.spec.gpus_per_worker} GPU` : ''));
    renderActions();
  }

  // Cancel asks twice (it cannot be undone); stop and resume act at once.
  function renderActions() {
    const act = async (verb, btn) => {
      btn.disabled = true;
      try {
        job = await api('POST', `${path}/${verb}`);
        message(note, null);
        render();
      } catch (e) {
        message(note, e);
        btn.disabled = false;
      }
    };
    const cancel = h('button.danger', { type: 'button', disabled: !(ACTIVE.includes(job.state) || job.state === 'STOPPED'), dataset: { action: 'cancel' } }, 'Cancel');
    cancel.addEventListener('click', () => {
      if (armed !== cancel) {
        armed = cancel;
        cancel.textContent = 'Confirm cancel';
        cancel.classList.add('armed');
        setTimeout(() => { if (armed === cancel && cancel.isConnected) { armed = null; cancel.textContent = 'Cancel'; cancel.classList.remove('armed'); } }, 5000);
        return;
      }
      armed = null;
      act('cancel', cancel);
    });
    fill(actions, cancel,
      h('button', { type: 'button', disabled: !ACTIVE.includes(job.state), dataset: { action: 'stop' }, onclick: (e) => act('stop', e.target) }, 'Stop'),
      h('button', { type: 'button', disabled: job.state !== 'STOPPED', dataset: { action: 'resume' }, onclick: (e) => act('resume', e.target) }, 'Resume'),
      h('span.muted', {}, 'Stop keeps the checkpoint to resume later; cancel ends the job for good.'));
  }

  function render() {
    renderHead();
    fill(size, sizeChart(job));
    fill(thr, throughput(job));
    fill(rst, restarts(job));
    fill(prog, progress(job));
    const n = job.attempts.length ? job.attempts[job.attempts.length - 1].world_size : (job.spec.workers || {}).max || 1;
    if (rankSel.options.length !== n) {
      const keep = rankSel.value || '0';
      fill(rankSel, Array.from({ length: n }, (_, r) => h('option', { value: r }, String(r))));
      rankSel.value = Number(keep) < n ? keep : '0';
    }
  }

  async function load() {
    try {
      job = await api('GET', path);
    } catch (e) {
      if (!alive) return;
      if (!job) fill(head, h('h1', {}, 'Job ', h('code', {}, id)));
      message(note, e);
      return;
    }
    if (alive) render();
  }
  const reload = debounce(load, 300);

  // The selected rank's log: its tail, then (while the job runs) what it writes next.
  async function openLog() {
    if (log) log.close();
    log = null;
    const q = `rank=${encodeURIComponent(rankSel.value || '0')}&stream=${encodeURIComponent(streamSel.value)}`;
    let offset = 0;
    try {
      const t = await text(`${path}/logs?${q}&tail=${LOG_TAIL}`);
      fill(logView, t.text || '(no output yet)\n');
      offset = t.offset;
    } catch (e) {
      fill(logView, e.kind === 'no-logs' ? '(no output yet: the job has not started)\n' : `(${e.message})\n`);
      if (e.kind !== 'no-logs') return;
    }
    logView.scrollTop = logView.scrollHeight;
    if (!alive || !followBox.checked || !job || !ACTIVE.includes(job.state)) return;
    const mine = follow(`${path}/logs?${q}&follow=1&offset=${offset}`, (chunk) => {
      if (logView.firstChild && /^\(no output yet/.test(logView.textContent)) fill(logView);
      const stick = logView.scrollTop + logView.clientHeight >= logView.scrollHeight - 8;
      logView.append(chunk);
      if (logView.textContent.length > LOG_KEEP) logView.textContent = logView.textContent.slice(-LOG_KEEP / 2);
      if (stick) logView.scrollTop = logView.scrollHeight;
    });
    log = mine;
    mine.done.catch((e) => { if (alive) logView.append(`\n(${e.message})\n`); }).finally(() => { if (log === mine) log = null; });
  }
  for (const el of [rankSel, streamSel, followBox]) el.addEventListener('change', openLog);

  ctx.follow();
  const timer = setInterval(() => { if (!document.hidden && job && ACTIVE.includes(job.state)) load(); }, REFRESH_MS);
  (async () => {
    await load();
    if (!alive || !job) return;
    openLog();
    try {
      const ev = await api('GET', `${path}/events`);
      if (alive) fill(events, ev.events.slice().reverse().map(eventRow));
    } catch (e) { /* the stream still brings new ones */ }
  })();

  return {
    unmount() { alive = false; clearInterval(timer); reload.cancel(); if (log) log.close(); },
    event(type, ev) {
      if (ev.job_id !== id) return;
      events.prepend(eventRow(ev));
      if (job && ev.state) job.state = ev.state;
      reload();
      if (type === 'started' && !log && followBox.checked) setTimeout(openLog, 400);
    },
  };
}
