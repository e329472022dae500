import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, busy, clearFlash, flash, focusRow, h, rowAction, showError, table } from '../ui.js';

const affiliate = boot.kind === 'affiliate';
const canWrite = boot.role !== 'member';
const form = document.getElementById('link-form');
const container = document.getElementById('links');
let names = new Map();
// figures are the links' last 30 days, read once per page: pausing or creating a link changes
// none of them.
let figures;

async function load() {
  try {
    const progs = await api.get('/api/programs', { limit: 100 });
    names = new Map(progs.data.map((p) => [p.id, p.name]));
    if (form) {
      const approved = (await api.get('/api/partnerships', { status: 'approved', limit: 100 })).data;
      form.program_id.replaceChildren(...approved.map((p) => h('option', { value: p.program_id }, names.get(p.program_id) || p.program_id)));
      form.querySelector('button[type=submit]').disabled = approved.length === 0;
      if (!approved.length) flash(t('links.no_partnership'), 'info');
    }
    const [page, figs] = await Promise.all([api.get('/api/tracking-links', { limit: 100 }), figures ?? linkFigures()]);
    figures = figs;
    const fig = (l) => figs.get(l.id) || { clicks: 0, conversions: { total: 0 }, amounts: [] };
    table(container, [
      { label: t('links.program'), render: (l) => names.get(l.program_id) || l.program_id },
      !affiliate && { label: t('partnerships.affiliate'), render: (l) => l.affiliate_name || l.affiliate_id },
      { label: t('links.url'), class: 'mono', render: (l) => h('div', { class: 'row' }, h('span', {}, l.url),
        h('button', { type: 'button', class: 'copy', dataset: { value: l.url }, 'aria-label': t('links.copy_of', { url: l.url }) }, t('common.copy'))) },
      { label: t('links.sub1'), render: (l) => l.sub1 || '–' },
      { label: t('links.clicks_30d'), class: 'num', render: (l) => fmt.number(fig(l).clicks) },
      { label: t('links.conversions_30d'), class: 'num', render: (l) => fmt.number(fig(l).conversions.total) },
      { label: affiliate ? t('links.earnings_30d') : t('links.commission_30d'), class: 'num', render: (l) => earnings(fig(l)) },
      { label: t('common.created'), render: (l) => fmt.dateTime(l.created_at) },
      { label: t('common.status'), render: (l) => badge(l.status, 'm') },
      affiliate && canWrite && { label: t('common.actions'), render: (l) => (l.status === 'active'
        ? h('button', { type: 'button', onclick: () => toggle(l), 'aria-label': t('links.pause_of', { url: l.url }) }, t('links.pause'))
        : h('button', { type: 'button', onclick: () => toggle(l), 'aria-label': t('links.resume_of', { url: l.url }) }, t('links.resume'))) },
    ].filter(Boolean), page.data, { caption: t('links.list_title'), empty: affiliate ? t('links.empty') : t('links.empty_advertiser') });
  } catch (err) {
    showError(err);
  }
}

// linkFigures are the last 30 days' figures of each link, by link id: a link missing has
// none.
async function linkFigures() {
  const to = new Date();
  const from = new Date(to.getTime() - 29 * 864e5);
  const day = (d) => d.toISOString().slice(0, 10);
  const report = await api.get('/api/stats', { group_by: 'link', from: day(from), to: day(to), limit: 1000 });
  return new Map(report.data.map((r) => [r.link_id, r]));
}

// earnings is a link's commission in its program's currency (one per link), '–' without any.
function earnings(r) {
  const a = r.amounts.find((m) => Number(m.commission) !== 0) || r.amounts[0];
  return a ? fmt.money(a.commission, a.currency) : '–';
}

async function toggle(l) {
  clearFlash();
  const active = l.status === 'active';
  await rowAction(container, l.id, () => api.post(`/api/tracking-links/${encodeURIComponent(l.id)}/${active ? 'pause' : 'resume'}`),
    active ? t('links.paused') : t('links.resumed'), load);
}

if (form) {
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    const body = { program_id: form.program_id.value };
    if (form.destination_url.value.trim()) body.destination_url = form.destination_url.value.trim();
    if (form.sub1.value.trim()) body.sub1 = form.sub1.value.trim();
    await busy(form, async () => {
      try {
        const l = await api.post('/api/tracking-links', body);
        flash(t('links.created', { url: l.url }));
        form.reset();
        await load();
        // The keyboard goes to the new link's copy button.
        focusRow(container, l.id);
      } catch (err) {
        showError(err, form);
      }
    });
  });
}
document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
load();
