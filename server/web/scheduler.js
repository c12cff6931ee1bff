// SPDX-License-Identifier: Apache-2.0
// scheduler.js - the scheduling policy, its settings and the loop's figures; admins switch
// the policy here (PUT /v1/scheduler, until ringd restarts).
import { api } from './api.js';
import { h, fill, num, message } from './dom.js';

const REFRESH_MS = 5000;
const ABOUT = {
  fifo: 'First come, first served with backfill: each queued job gets the most workers in its range that fit; running jobs keep what they have.',
  priority: 'As fifo, by priority: a job of higher priority that does not fit preempts lower ones, which resume from their checkpoints.',
  tiresias: 'Least attained service first (GPU-seconds so far, in discrete queues), so short jobs are not stuck behind long ones.',
  dynamic: 'Keeps re-dividing the GPUs among running jobs by their measured speed at each size, stopping and restarting them from checkpoints when the time saved outweighs the restart.',
};

export function mount(root, ctx) {
  const info = h('div'), note = h('div'), form = h('div');
  let alive = true;
  fill(root, h('section.scheduler', {}, h('h1', {}, 'Scheduler'), note, h('div.grid', {},
    h('section.card', {}, h('h2', {}, 'Policy'), info), h('section.card', {}, h('h2', {}, 'Switch the policy'), form))));

  function render(s) {
    const facts = [['policy', s.policy], ['backend', s.backend], ['pass every', `${s.interval_s} s`],
      ['restart cost (until measured)', `${s.restart_cost_s} s`], ['hysteresis', `${s.hysteresis}×`],
      ['passes', num(s.passes)], ['resizes', num(s.resizes)], ['preemptions', num(s.preemptions)],
      ['pass time, mean / max', `${num(s.pass_ms_mean, 2)} / ${num(s.pass_ms_max, 2)} ms`]];
    fill(info, h('p', {}, ABOUT[s.policy] || ''), h('dl.facts', {}, facts.map(([k, v]) => [h('dt', {}, k), h('dd', { dataset: { fact: k } }, v)])));
    if (!ctx.me.admin) {
      fill(form, h('p.muted', {}, 'Only an admin token can switch the policy.'));
      return;
    }
    if (form.querySelector('select')) return; // keep what the admin is choosing
    const sel = h('select', { 'aria-label': 'Policy', id: 'policy' }, s.policies.map((p) => h('option', { value: p, selected: p === s.policy }, p)));
    const about = h('p.muted', {}, ABOUT[s.policy] || '');
    sel.addEventListener('change', () => fill(about, ABOUT[sel.value] || ''));
    const go = h('button', { type: 'button', id: 'switch' }, 'Switch policy');
    go.addEventListener('click', async () => {
      go.disabled = true;
      try {
        const s2 = await api('PUT', '/v1/scheduler', { policy: sel.value });
        message(note, null);
        fill(form);
        render(s2);
      } catch (e) {
        message(note, e);
      } finally {
        go.disabled = false;
      }
    });
    fill(form, h('div.controls', {}, sel, go), about,
      h('p.muted', {}, 'Until ringd restarts; ringd.conf\'s policy is the default.'));
  }

  async function load() {
    try {
      const s = await api('GET', '/v1/scheduler');
      if (alive) { message(note, null); render(s); }
    } catch (e) {
      if (alive) message(note, e);
    }
  }
  ctx.follow();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  load();
  return { unmount() { alive = false; clearInterval(timer); }, event() {} };
}
