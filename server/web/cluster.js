// SPDX-License-Identifier: Apache-2.0
// cluster.js - the cluster: each node's slots and GPUs and which job holds which (one colour
// per job throughout), Slurm's own view when that is the backend, and the share of GPUs and
// slots in use over time.
import { api } from './api.js';
import { h, fill, bar, colour, debounce, message } from './dom.js';
import { stepChart } from './chart.js';

const REFRESH_MS = 5000;
const WINDOWS = [['15 min', 900], ['1 hour', 3600], ['6 hours', 21600], ['1 day', 86400]];
let windowS = 900; // kept while the tab lives

const jobLink = (id) => (id && !String(id).startsWith('slurm:')
  ? h('a', { href: '#/jobs/' + encodeURIComponent(id) }, id) : h('span', {}, id || ''));

function gpuGrid(gpus) {
  return h('div.gpus', {}, gpus.map((g) => h('span.gpu' + (g.job ? '.held.' + colour(g.job) : ''),
    { title: g.job ? `GPU ${g.id}: ${g.job}` : `GPU ${g.id}: free`, dataset: { job: g.job || '' } }, String(g.id))));
}

function node(n) {
  const used = n.slots - n.slots_free;
  return h('section.card.node', { dataset: { node: n.name } },
    h('h2', {}, n.name, n.offline ? h('span.badge.s-failed', {}, 'offline') : null),
    h('div.facts-row', {}, h('span', {}, `slots ${used} / ${n.slots}`), bar(n.slots ? used / n.slots : null, `${used} of ${n.slots} slots`)),
    n.gpus.length ? [h('div.facts-row', {}, h('span', {}, `GPUs ${n.gpus.length - n.gpus_free} / ${n.gpus.length}`)), gpuGrid(n.gpus)]
      : h('p.muted', {}, 'no GPUs'),
    n.jobs.length ? h('ul.holders', {}, n.jobs.map((j) => h('li', {}, h('span.key.' + colour(j.id)), jobLink(j.id),
      ` · ${j.workers} worker${j.workers > 1 ? 's' : ''}`, j.gpus.length ? ` · GPUs ${j.gpus.join(',')}` : '', ` · ${j.state.toLowerCase()}`)))
      : h('p.muted', {}, 'idle'));
}

function slurmView(s) {
  if (!s) return null;
  if (s.error) return h('section.card.wide', {}, h('h2', {}, 'Slurm'), h('p.error', {}, s.error));
  return h('section.card.wide', {}, h('h2', {}, "Slurm's view"), h('div.table-wrap', {}, h('table.small', {},
    h('thead', {}, h('tr', {}, ['Node', 'State', 'CPUs', 'GPUs', 'Jobs'].map((c) => h('th', {}, c)))),
    h('tbody', {}, s.nodes.map((n) => h('tr', {}, h('td', {}, n.name), h('td', {}, n.state), h('td.num', {}, n.cpus),
      h('td', {}, n.gpus.length ? gpuGrid(n.gpus) : '–'),
      h('td', {}, n.jobs.map((j, i) => [i ? ', ' : '', jobLink(j.job)]))))))));
}

function usageChart(u) {
  const pct = (v, cap) => (cap > 0 ? (100 * v) / cap : 0);
  const series = [];
  if (u.capacity.gpus > 0) series.push({ points: u.points.map((p) => [Date.parse(p.t) / 1000, pct(p.gpus, u.capacity.gpus)]), cls: 's0', label: 'GPUs in use, %' });
  series.push({ points: u.points.map((p) => [Date.parse(p.t) / 1000, pct(p.slots, u.capacity.slots)]), cls: 's1', label: 'slots in use, %' });
  const last = u.points[u.points.length - 1] || { gpus: 0, slots: 0 };
  return [stepChart({ series, guides: [{ v: 100, cls: 'max', label: 'capacity' }], yLabel: '% in use', title: 'utilisation over time', wide: true }),
    h('p.caption', {}, u.capacity.gpus > 0 ? [h('span.key.s0'), `GPUs (now ${last.gpus} of ${u.capacity.gpus})  `] : null,
      h('span.key.s1'), `slots (now ${last.slots} of ${u.capacity.slots})`)];
}

export function mount(root, ctx) {
  const summary = h('p.meta'), note = h('div'), nodes = h('div.grid'), usage = h('div'), slurm = h('div');
  let alive = true;
  const sel = h('select', { 'aria-label': 'Window', onchange: (e) => { windowS = Number(e.target.value); load(); } },
    WINDOWS.map(([label, s]) => h('option', { value: s, selected: s === windowS }, label)));
  fill(root, h('section.cluster', {}, h('h1', {}, 'Cluster'), summary, note,
    h('section.card.wide', {}, h('div.bar-row', {}, h('h2', {}, 'Utilisation over time'), sel), usage),
    nodes, slurm));

  async function load() {
    let c, u;
    try {
      [c, u] = await Promise.all([api('GET', '/v1/cluster'), api('GET', `/v1/cluster/usage?window=${windowS}`)]);
    } catch (e) {
      if (alive) message(note, e);
      return;
    }
    if (!alive) return;
    message(note, null);
    const gpus = c.nodes.reduce((a, n) => a + n.gpus.length, 0), gfree = c.nodes.reduce((a, n) => a + n.gpus_free, 0);
    const slots = c.nodes.reduce((a, n) => a + n.slots, 0), sfree = c.nodes.reduce((a, n) => a + n.slots_free, 0);
    fill(summary, `${c.nodes.length} node${c.nodes.length > 1 ? 's' : ''} · ${gpus - gfree} of ${gpus} GPUs and ${slots - sfree} of ${slots} slots in use · backend ${c.backend} · policy `,
      h('a', { href: '#/scheduler' }, c.policy));
    fill(nodes, c.nodes.map(node));
    fill(usage, usageChart(u));
    fill(slurm, slurmView(c[c.backend] && c.backend !== 'local' ? c[c.backend] : null));
  }
  ctx.follow();
  const soon = debounce(load, 800);
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  load();
  return {
    unmount() { alive = false; clearInterval(timer); soon.cancel(); },
    event() { soon(); }, // any transition may have taken or freed slots and GPUs
  };
}
